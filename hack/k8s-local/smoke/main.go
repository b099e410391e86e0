// Command smoke is the workload of hack/k8s-local/smoke.sh, the check that a
// k8s-local cluster does what drip's chart needs: pods run, get a cluster
// DNS name and reach Services and the API server.
//
//	smoke serve            answer HTTP on :8080 with the pod's hostname, until SIGTERM
//	smoke lookup NAME      resolve NAME through the pod's DNS and print the addresses
//	smoke get URL          print the body of an HTTP GET of URL
//	smoke apiserver        GET /version from the API server as the pod's service account
//
// It is a separate static binary (packed by cmd/ociimage) because the test
// images have no shell, nslookup or curl.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: smoke serve | lookup NAME | get URL | apiserver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch {
	case args[0] == "serve" && len(args) == 1:
		return serve()
	case args[0] == "lookup" && len(args) == 2:
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Println(args[1], addrs)
		return nil
	case args[0] == "get" && len(args) == 2:
		return get(ctx, http.DefaultClient, args[1], "")
	case args[0] == "apiserver" && len(args) == 1:
		return apiserver(ctx)
	}
	return fmt.Errorf("unknown command %q", args)
}

func serve() error {
	host, _ := os.Hostname()
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, host) })}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; srv.Close() }()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// apiserver checks what the issue found easy to get wrong: the API server
// must be reachable from pods through the kubernetes Service, and the
// kube-root-ca.crt the controller manager publishes must verify it.
func apiserver(ctx context.Context) error {
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("%s/ca.crt holds no certificate", saDir)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	return get(ctx, c, "https://"+host+"/version", string(token))
}

func get(ctx context.Context, c *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	_, err = os.Stdout.Write(body)
	return err
}
