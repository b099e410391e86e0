package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
)

func newSubCmd() *cobra.Command {
	var (
		conn     connFlags
		broker   string
		count    int
		buffer   int
		file     string
		deadline time.Duration
		twoPaths bool
	)
	cmd := &cobra.Command{
		Use:   "sub --broker ADDR ('PREDICATE' | --file PATH | -)",
		Short: "Subscribe and print matching messages as JSON lines",
		Long: `Subscribe through a broker of the mesh and print every delivered message on
standard output as one JSON line:

  {"attrs":{"agency":"AP","priority":2},"payload":"text","ingress":3,"hops":2,"latency_ms":1.250}

Attribute types are kept (floats always have a '.' or exponent); a payload that
is not UTF-8 is printed in base64 under "payload_b64"; latency_ms is measured
from the ingress broker's publication time, so it includes the clock offset
between that broker and this machine. With --deadline, messages that travelled
with one also carry mesh_ms, the time from the ingress to this subscriber's
broker as the mesh measured it hop by hop (no clock offset). When the broker reports messages it
dropped because this subscriber read too slowly, a line {"lost":N,"total":T}
comes before the next message.

Give several brokers (comma-separated) or a dns:/// name to fail over: when the
broker dies the subscription is installed again at the next one (a line on
standard error says how long it was without a broker; messages published then
are missed), and when the broker shuts down gracefully it moves first, missing
nothing. Each message is printed once.

The predicate is in drip's predicate language, for example
  agency = "AP" && priority >= 2 || keywords contains "Italy"
It is the argument, or read from a file (--file PATH), or from standard input
(-): long predicates do not fit on a command line.

--deadline asks the mesh to deliver each matching message within that time of its
publication: such messages are sent first at every link, and a link whose
delay breaks the deadline is routed around at once; deliveries later than it
are still printed, and counted at the end. --two-paths sends every matching
message over two link-disjoint paths, so that one failed link loses nothing, at
the cost of the second copy's bytes (docs/design.md §11).

Stops after --count messages, or cleanly on SIGINT or SIGTERM.`,
		Example: `  drip sub --broker localhost:7000 'agency = "AP" && priority >= 2'
  drip sub --broker localhost:7000 --count 10 'price > 20.5 || stock prefix "XY"' | jq .payload
  drip sub --broker localhost:7000 --deadline 50ms --two-paths 'alarm = true'`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case file != "" && len(args) > 0:
				return fmt.Errorf("give the predicate as an argument or with --file, not both")
			case file == "" && len(args) != 1:
				return fmt.Errorf("want one argument, the predicate (quote it for the shell; --file or - to read it), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return fmt.Errorf("--count %d: want 0 (no limit) or more", count)
			}
			if deadline < 0 || deadline > time.Hour {
				return fmt.Errorf("--deadline %v: want 0 (none) or a duration up to 1h", deadline)
			}
			var opts []client.SubscribeOption
			if deadline > 0 {
				opts = append(opts, client.WithDeadline(deadline))
			}
			if twoPaths {
				opts = append(opts, client.WithTwoPaths())
			}
			pred, err := readPredicate(cmd.InOrStdin(), file, args)
			if err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			logw := cmd.ErrOrStderr()
			c, err := conn.dial(ctx, broker, client.WithBufferSize(buffer), client.WithGapHandler(func(g client.Gap) {
				fmt.Fprintf(logw, "drip sub: subscribed again at broker %s after %v without one (%s ended: %v)\n",
					g.To, g.Duration().Round(time.Millisecond), g.From, g.Err)
			}))
			if err != nil {
				return interrupted(ctx, logw, err)
			}
			defer c.Close()
			sub, err := c.Subscribe(ctx, pred, opts...)
			if err != nil {
				return interrupted(ctx, logw, err)
			}
			defer sub.Close()
			fmt.Fprintf(logw, "drip sub: subscription %d at broker %s: %s\n", sub.ID(), sub.Broker(), sub.Predicate())

			out := bufio.NewWriter(cmd.OutOrStdout())
			var buf []byte
			var received, reported uint64
			var endErr error
			for count == 0 || received < uint64(count) {
				d, err := sub.Next(ctx)
				if err != nil {
					endErr = err
					break
				}
				received++
				buf = buf[:0]
				if d.Lost > 0 {
					buf = appendLostJSON(buf, d.Lost, d.LostTotal)
					reported = d.LostTotal
				}
				var latency *float64
				if !d.PublishedAt.IsZero() {
					ms := math.Round(float64(time.Since(d.PublishedAt))/float64(time.Microsecond)) / 1000
					latency = &ms
				}
				buf = appendDeliveryJSON(buf, d, latency)
				if _, err := out.Write(buf); err != nil {
					return err
				}
				// Flush per message: a subscriber is read by people and
				// pipes that expect each message when it arrives.
				if err := out.Flush(); err != nil {
					return err
				}
			}
			if total := sub.Lost(); total > reported {
				_, _ = out.Write(appendLostJSON(nil, total-reported, total))
			}
			if err := out.Flush(); err != nil {
				return err
			}
			if deadline > 0 {
				fmt.Fprintf(logw, "drip sub: received %s, %d lost, %d later than the %v deadline\n",
					Plural(int64(received), "message", "messages"), sub.Lost(), sub.DeadlineMisses(), deadline)
			} else {
				fmt.Fprintf(logw, "drip sub: received %s, %d lost\n", Plural(int64(received), "message", "messages"), sub.Lost())
			}
			switch {
			case endErr == nil, ctx.Err() != nil:
				return nil
			case errors.Is(endErr, io.EOF):
				return errors.New("the broker ended the subscription")
			default:
				return endErr
			}
		},
	}
	cmd.Flags().StringVar(&broker, "broker", "", brokerFlagHelp)
	cmd.Flags().IntVarP(&count, "count", "n", 0, "exit after this many messages (0: no limit)")
	cmd.Flags().IntVar(&buffer, "buffer", client.DefaultBufferSize, "deliveries to buffer before the broker must hold or drop them")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the predicate from this file (- for standard input)")
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "deliver each matching message within this time of its publication (0: no deadline)")
	cmd.Flags().BoolVar(&twoPaths, "two-paths", false, "send each matching message over two link-disjoint paths")
	conn.register(cmd, "drip-sub")
	_ = cmd.MarkFlagRequired("broker")
	cmd.Flags().SortFlags = false
	return cmd
}

// interrupted turns an error caused by SIGINT or SIGTERM into a clean exit.
func interrupted(ctx context.Context, logw io.Writer, err error) error {
	if ctx.Err() != nil {
		fmt.Fprintln(logw, "drip sub: interrupted before the subscription was in place")
		return nil
	}
	return err
}

func appendLostJSON(b []byte, lost, total uint64) []byte {
	b = append(b, `{"lost":`...)
	b = strconv.AppendUint(b, lost, 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendUint(b, total, 10)
	return append(b, "}\n"...)
}

// readPredicate returns the predicate: the argument, or the contents of
// file, or standard input for "-" (as the argument or the file). Input is
// read up to the broker's limit on a predicate's text, so a wrong file
// fails with a clear message instead of filling memory.
func readPredicate(stdin io.Reader, file string, args []string) (string, error) {
	if file == "" && args[0] != "-" {
		return args[0], nil
	}
	from, r := file, stdin
	if from == "" || from == "-" {
		from = "standard input"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		r = f
	}
	limit := content.DefaultLimits().MaxText
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("reading the predicate from %s: %w", from, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("the predicate in %s is over %d bytes, the broker's limit on a predicate's text", from, limit)
	}
	return string(b), nil
}
