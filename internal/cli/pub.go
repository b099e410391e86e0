package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/dripmesh/drip/client"
)

// maxLineBytes bounds one JSON line: a broker accepts payloads up to 1 MiB
// (wire.DefaultMessageLimits), 1.4 MiB in base64, plus attributes.
const maxLineBytes = 4 << 20

func newPubCmd() *cobra.Command {
	var (
		conn     connFlags
		broker   string
		attrs    []string
		payload  string
		count    int
		perSec   rateValue
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pub --broker ADDR [--attr name=value ...] [--payload TEXT] [--count N] [--rate R/s]",
		Short: "Publish messages to the mesh",
		Long: `Publish messages through a broker of the mesh.

With --attr, publishes one message built from the flags --count times. An
attribute value is written as in predicates: "quoted" for a string, 3 for an
int, 2.5 for a float, true or false; a bare word is a string.

Without --attr, reads messages from standard input, one JSON object per line:

  {"attrs":{"a":"x","n":3,"f":2.5,"b":true},"payload":"text"}

A JSON number with no '.' or exponent is an int, any other a float. Binary
payloads go in base64 under "payload_b64". Blank lines are skipped.

--deadline gives every message a delivery deadline: the mesh sends it first at
every link, beside the deadlines subscribers ask for (docs/design.md §11).

A one-line summary goes to standard error. SIGINT or SIGTERM stops publishing
and still reports what the broker accepted.

Give several brokers (comma-separated) or a dns:/// name to fail over. When the
broker shuts down gracefully, what it had not published goes to the next one:
nothing is lost or sent twice. When it dies, the messages it had not yet
acknowledged may or may not have been published; a line on standard error
counts them, and publishing goes on at the next broker.`,
		Example: `  drip pub --broker localhost:7000 --attr agency=AP --attr priority=2 --payload 'storm warning'
  drip pub --broker localhost:7000 -a 'title="hello world"' -a score=0.5 --count 1000 --rate 100/s
  echo '{"attrs":{"agency":"AP","priority":2},"payload":"x"}' | drip pub --broker localhost:7000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jsonMode := len(attrs) == 0
			switch {
			case jsonMode && cmd.Flags().Changed("payload"):
				return errors.New("--payload needs --attr: without --attr, messages come as JSON lines from standard input")
			case jsonMode && cmd.Flags().Changed("count"):
				return errors.New("--count needs --attr: without --attr, every JSON line on standard input is published once")
			case count < 0:
				return fmt.Errorf("--count %d: want 0 (until interrupted) or more", count)
			case deadline < 0 || deadline > time.Hour:
				return fmt.Errorf("--deadline %v: want 0 (none) or a duration up to 1h", deadline)
			}
			var next func(context.Context) (client.Message, bool, error)
			if jsonMode {
				lines, stop := readLines(cmd.InOrStdin())
				defer stop()
				next = nextJSONMessage(lines)
			} else {
				a, err := parseAttrFlags(attrs)
				if err != nil {
					return err
				}
				msg := client.Message{Attrs: a, Payload: []byte(payload)}
				sent := 0
				next = func(context.Context) (client.Message, bool, error) {
					if count > 0 && sent == count {
						return client.Message{}, false, nil
					}
					sent++
					return msg, true, nil
				}
			}
			if deadline > 0 {
				inner := next
				next = func(ctx context.Context) (client.Message, bool, error) {
					m, ok, err := inner(ctx)
					m.Deadline = deadline
					return m, ok, err
				}
			}
			return publish(cmd, &conn, broker, float64(perSec), next)
		},
	}
	cmd.Flags().StringVar(&broker, "broker", "", brokerFlagHelp)
	cmd.Flags().StringArrayVarP(&attrs, "attr", "a", nil, "attribute `name=value` (repeatable); without it, read JSON lines from standard input")
	cmd.Flags().StringVar(&payload, "payload", "", "message payload `text` (with --attr)")
	cmd.Flags().IntVarP(&count, "count", "n", 1, "how many times to publish the --attr message (0: until interrupted)")
	cmd.Flags().Var(&perSec, "rate", "messages per second, like 100 or 2.5/s (0: as fast as possible)")
	cmd.Flags().DurationVar(&deadline, "deadline", 0, "deliver every message within this time of its publication (0: no deadline)")
	conn.register(cmd, "drip-pub")
	_ = cmd.MarkFlagRequired("broker")
	cmd.Flags().SortFlags = false
	return cmd
}

// publish sends the messages next yields, at most perSec a second, and
// prints the summary.
func publish(cmd *cobra.Command, conn *connFlags, broker string, perSec float64, next func(context.Context) (client.Message, bool, error)) error {
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	logw := cmd.ErrOrStderr()
	failovers := 0
	c, err := conn.dial(ctx, broker, client.WithFailoverHandler(func(f client.Failover) {
		failovers++
		switch {
		case f.InFlight > 0:
			fmt.Fprintf(logw, "drip pub: broker %s failed (%v) with %s unacknowledged, which may or may not have been published; publishing at %s\n",
				f.From, f.Err, Plural(int64(f.InFlight), "message", "messages"), f.To)
		default:
			fmt.Fprintf(logw, "drip pub: broker %s left; publishing at %s (%s resent)\n", f.From, f.To, Plural(int64(f.Resent), "message", "messages"))
		}
	}))
	if err != nil {
		return err
	}
	defer c.Close()
	// The stream outlives an interruption, so that the broker's summary of
	// what was sent can still be read.
	p, err := c.NewPublisher(context.WithoutCancel(cmd.Context()))
	if err != nil {
		return err
	}
	limit := rate.Inf
	if perSec > 0 {
		limit = rate.Limit(perSec)
	}
	limiter := rate.NewLimiter(limit, 1)
	start := time.Now()
	var sendErr error
	interrupted := false
	for {
		msg, ok, err := next(ctx)
		if err != nil {
			sendErr = err
			break
		}
		if !ok {
			break
		}
		if err := limiter.Wait(ctx); err != nil {
			interrupted = true
			break
		}
		if err := p.Publish(msg); err != nil {
			sendErr = err
			break
		}
	}
	interrupted = interrupted || ctx.Err() != nil
	sent := p.Sent()
	sum, closeErr := p.Close()
	if closeErr != nil {
		if sendErr != nil && !errors.Is(sendErr, closeErr) {
			return fmt.Errorf("%w; then: %w", sendErr, closeErr)
		}
		return closeErr
	}
	how := "published"
	if interrupted {
		how = "interrupted after publishing"
	}
	who := "the broker"
	if failovers > 0 {
		who = "the brokers"
	}
	fmt.Fprintf(logw, "drip pub: %s %s to %s in %v: %s accepted %d, %d matched no subscriber\n",
		how, Plural(int64(sent), "message", "messages"), broker, time.Since(start).Round(time.Millisecond), who, sum.Accepted, sum.Unmatched)
	if cc := p.Congestion(); cc.Held > 0 {
		fmt.Fprintf(logw, "drip pub: subscribers asked to slow down: %d messages waited for their flows, %v in all\n", cc.Held, cc.Waited.Round(time.Millisecond))
	}
	return sendErr
}

type line struct {
	n    int
	text []byte
	err  error
}

// readLines reads r line by line in a goroutine, so that a signal can
// interrupt a wait for input; stop makes the goroutine exit once its
// current read returns.
func readLines(r io.Reader) (<-chan line, func()) {
	out := make(chan line)
	done := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
		n := 0
		for sc.Scan() {
			n++
			select {
			case out <- line{n: n, text: bytes.Clone(sc.Bytes())}:
			case <-done:
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("line %d: longer than %d bytes", n+1, maxLineBytes)
			}
			select {
			case out <- line{n: n + 1, err: err}:
			case <-done:
			}
		}
	}()
	var stopped bool
	return out, func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}
}

// nextJSONMessage yields the messages of the lines, skipping blank ones,
// and nothing more once ctx ends.
func nextJSONMessage(lines <-chan line) func(context.Context) (client.Message, bool, error) {
	return func(ctx context.Context) (client.Message, bool, error) {
		for {
			var l line
			select {
			case got, ok := <-lines:
				if !ok {
					return client.Message{}, false, nil
				}
				l = got
			case <-ctx.Done():
				return client.Message{}, false, nil
			}
			if l.err != nil {
				return client.Message{}, false, fmt.Errorf("reading standard input: %w", l.err)
			}
			if len(bytes.TrimSpace(l.text)) == 0 {
				continue
			}
			m, err := parseJSONMessage(l.text)
			if err != nil {
				return client.Message{}, false, fmt.Errorf("standard input line %d: %w", l.n, err)
			}
			return m, true, nil
		}
	}
}
