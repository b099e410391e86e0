package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// RunDir holds one directory of state per lab.
const RunDir = "/run/drip-lab"

// Files of a lab's state directory.
const (
	configFile  = "config.json"  // what `up` asked for; read by the daemon
	pidFile     = "daemon.pid"   // the daemon's process ID
	socketFile  = "control.sock" // the daemon's control API (HTTP)
	sitesFile   = "sites.json"   // the site table, written once the sites exist
	logFile     = "daemon.log"   // the daemon's stdout and stderr
	tunName     = "lab0"         // the TUN device inside every site namespace
	maxTUNFrame = 65535
)

// StateDir is the state directory of the named lab.
func StateDir(name string) string { return filepath.Join(RunDir, name) }

// daemonConfig is what Up hands the daemon.
type daemonConfig struct {
	Topology    string        `json:"topology"` // YAML
	Prefix      string        `json:"prefix"`
	Seed        uint64        `json:"seed"`
	QueueTime   time.Duration `json:"queue_time_ns"`
	MetricsAddr string        `json:"metrics_addr,omitempty"`
}

// Site is one site of a running lab.
type Site struct {
	Name      string     `json:"name"`
	Index     int        `json:"index"`
	Namespace string     `json:"namespace"`
	Addr      netip.Addr `json:"addr"`
}

// siteTable is sites.json.
type siteTable struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Sites  []Site `json:"sites"`
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeFileAtomic writes via a temporary file and a rename, so a reader
// never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}
