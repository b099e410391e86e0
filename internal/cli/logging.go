package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogFlags are the logging flags every long-running command shares. They
// are exported for the driplab commands (internal/testbed/cli), so that
// both binaries log alike.
type LogFlags struct {
	level  string
	format string
}

// Register adds --log-level (default info) and --log-format to cmd.
func (f *LogFlags) Register(cmd *cobra.Command) { f.RegisterLevel(cmd, "info") }

// RegisterLevel is Register with another default level, for a command
// whose own output matters more than its log.
func (f *LogFlags) RegisterLevel(cmd *cobra.Command, level string) {
	cmd.Flags().StringVar(&f.level, "log-level", level, "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&f.format, "log-format", "auto", "log format: json, console, or auto (console on a terminal, JSON otherwise)")
}

// Logger builds a zap logger writing to w: JSON when w is not a terminal
// (Kubernetes collects it), human-readable console output when it is.
func (f *LogFlags) Logger(w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(f.level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	format := f.format
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case "console":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("--log-format %q: want json, console or auto", f.format)
	}
	// Every broker of `drip local` logs through this core from its own
	// goroutines; the command's writer need not be safe for that.
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
