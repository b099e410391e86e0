package systems

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/bench"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/testbed/stomp"
)

// ActiveMQOptions configure the ActiveMQ system.
type ActiveMQOptions struct {
	// Home is the ActiveMQ installation; default /usr/share/activemq (the
	// Debian package).
	Home string
	// Java is the java binary; default "java" from PATH.
	Java string
	// HeapMB is each broker's JVM heap; default 256.
	HeapMB int
	// NoConduit turns conduit subscriptions off. With them (ActiveMQ's
	// default, and what Carzaniga09 §5.2.1 measured) a network bridge merges
	// all consumers of the topic behind it into one subscription without a
	// selector, so every message travels to every broker that has any
	// subscriber: the "controlled flooding" §5.2.1 describes. Without them
	// each remote consumer is a separate subscription with its selector,
	// and a message crosses a link once per matching consumer behind it;
	// on a topic each of those copies is then dispatched to every matching
	// consumer there, so subscribers see duplicates (the oracle counts
	// them).
	NoConduit bool
	// NetworkTTL bounds the brokers a message or subscription crosses;
	// default the topology's diameter (at least 1).
	NetworkTTL int
}

// NewActiveMQ returns the ActiveMQ system.
func NewActiveMQ(o ActiveMQOptions) System {
	if o.Home == "" {
		o.Home = "/usr/share/activemq"
	}
	if o.Java == "" {
		o.Java = "java"
	}
	if o.HeapMB == 0 {
		o.HeapMB = 256
	}
	return &activeMQ{opts: o}
}

type activeMQ struct{ opts ActiveMQOptions }

// ActiveMQTopic is the one topic every message is sent to (Carzaniga09
// §5.1.3: content-based selection is done by selectors, not destinations).
const ActiveMQTopic = "/topic/drip"

func (*activeMQ) Name() string { return "activemq" }

func (a *activeMQ) Available() error {
	if _, err := exec.LookPath(a.opts.Java); err != nil {
		return fmt.Errorf("activemq: %w (install the Debian package activemq)", err)
	}
	if _, err := os.Stat(a.jar()); err != nil {
		return fmt.Errorf("activemq: %w (install the Debian package activemq)", err)
	}
	return nil
}

func (a *activeMQ) jar() string { return filepath.Join(a.opts.Home, "bin", "activemq.jar") }

// Version reads the Implementation-Version of activemq.jar's manifest.
func (a *activeMQ) version() string {
	zr, err := zip.OpenReader(a.jar())
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer zr.Close()
	f, err := zr.Open("META-INF/MANIFEST.MF")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Implementation-Version: "); ok {
			return "Apache ActiveMQ " + strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// amqSite is one broker.
type amqSite struct {
	name  string
	dir   string
	stomp string // host:port of the STOMP connector
	// in[n] is the port of the connector that neighbour n's duplex network
	// connector dials: one per link, so that a link's bytes can be told
	// from the socket's port (amqLinks).
	in   map[string]int
	out  []amqBridge // network connectors this broker creates
	proc *process
}

type amqBridge struct {
	To   string
	Addr string // host:port of the neighbour's connector for this link
}

type amqDeployment struct {
	sys     *activeMQ
	spec    Spec
	place   Placement
	order   []string
	sites   map[string]*amqSite
	ttl     int
	version string
	java    string
	files   map[string]string
}

func (a *activeMQ) Start(ctx context.Context, spec Spec) (Deployment, error) {
	if err := a.Available(); err != nil {
		return nil, err
	}
	return retryTakenPorts(func() (Deployment, error) { return a.start(ctx, spec) })
}

func (a *activeMQ) start(ctx context.Context, spec Spec) (Deployment, error) {
	d := &amqDeployment{sys: a, spec: spec, place: spec.placement(), order: sites(spec.Topology), sites: map[string]*amqSite{}, version: a.version()}
	d.ttl = a.opts.NetworkTTL
	if d.ttl == 0 {
		d.ttl = max(Diameter(spec.Topology), 1)
	}
	if out, err := exec.Command(a.opts.Java, "-version").CombinedOutput(); err == nil {
		d.java = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	ok := false
	defer func() {
		if !ok {
			_ = d.Close()
		}
	}()
	if err := d.start(ctx); err != nil {
		return nil, fmt.Errorf("activemq: %w", err)
	}
	ok = true
	return d, nil
}

func (d *amqDeployment) start(ctx context.Context) error {
	t := d.spec.Topology
	for _, name := range d.order {
		in := 0
		for _, l := range t.Links {
			if l.B == name {
				in++
			}
		}
		ports, err := freePorts(ctx, d.place, name, 1+in)
		if err != nil {
			return err
		}
		s := &amqSite{name: name, dir: filepath.Join(d.spec.Dir, "activemq-"+name), stomp: hostPort(d.place.Host(name), ports[0]), in: map[string]int{}}
		k := 1
		// Only the link's first site creates the duplex connector, so that
		// each link is one bridge.
		for _, l := range t.Links {
			if l.B == name {
				s.in[l.A] = ports[k]
				k++
			}
		}
		d.sites[name] = s
	}
	for _, l := range t.Links {
		b := d.sites[l.B]
		d.sites[l.A].out = append(d.sites[l.A].out, amqBridge{To: l.B, Addr: hostPort(d.place.Host(l.B), b.in[l.A])})
	}
	for i, name := range d.order {
		s := d.sites[name]
		if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o755); err != nil {
			return err
		}
		conf, err := d.config(s)
		if err != nil {
			return err
		}
		files := map[string]string{"activemq.xml": conf, "log4j.properties": amqLog4j}
		for f, text := range files {
			if err := os.WriteFile(filepath.Join(s.dir, f), []byte(text), 0o644); err != nil {
				return err
			}
		}
		if i == 0 {
			d.files = files
		}
		if s.proc, err = startProcess(d.place, name, "activemq", filepath.Join(s.dir, "activemq.log"), d.argv(s), nil); err != nil {
			return err
		}
	}
	for _, name := range d.order {
		s := d.sites[name]
		// An open port is not enough: on a loaded 2-core machine a broker
		// just started closed a STOMP connection in its handshake
		// (unexpected EOF), so a site is up once a handshake completes.
		e := &amqEndpoint{d: d, site: name, addr: s.stomp}
		if err := waitAccepting(ctx, s.stomp, s.proc.alive, func(ctx context.Context) error {
			c, err := e.dial(ctx)
			if err == nil {
				c.Close()
			}
			return err
		}); err != nil {
			return fmt.Errorf("site %s: %w", name, err)
		}
	}
	return nil
}

// argv is how the Debian package's bin/activemq starts a broker, minus its
// init-script machinery: one JVM per broker, each with its own base, conf
// and data directories.
func (d *amqDeployment) argv(s *amqSite) []string {
	o := d.sys.opts
	heap := strconv.Itoa(o.HeapMB) + "m"
	return []string{
		o.Java, "-Xms" + heap, "-Xmx" + heap, "-Djava.awt.headless=true",
		"-Dactivemq.home=" + o.Home, "-Dactivemq.base=" + s.dir, "-Dactivemq.conf=" + s.dir,
		"-Dactivemq.data=" + filepath.Join(s.dir, "data"),
		"-Dlog4j.configuration=file:" + filepath.Join(s.dir, "log4j.properties"),
		"-jar", d.sys.jar(), "start", "xbean:file:" + filepath.Join(s.dir, "activemq.xml"),
	}
}

// amqLog4j logs warnings, and the network bridges' comings and goings,
// which Ready reads.
const amqLog4j = `log4j.rootLogger=WARN, out
log4j.logger.org.apache.activemq.network=INFO
log4j.logger.org.apache.activemq.broker.BrokerService=INFO
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{ISO8601} %-5p [%c{1}] %m%n
`

var amqTemplate = template.Must(template.New("activemq.xml").Funcs(template.FuncMap{"x": xmlEscape}).Parse(
	`<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <!-- Generated by drip's experiment runner for site {{x .Site}}.
       Carzaniga09 §5.1.3: the fastest JMS configuration, non-persistent
       messages (persistent="false", no store) and non-durable topic
       subscriptions. -->
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="{{x .Site}}"
          persistent="false" useJmx="false" schedulerSupport="false"
          advisorySupport="true" dataDirectory="{{x .Data}}">
{{- if .Bridges}}
    <networkConnectors>
{{- range .Bridges}}
      <networkConnector name="{{x $.Site}}-{{x .To}}" uri="static:(tcp://{{x .Addr}})?initialReconnectDelay=200&amp;maxReconnectDelay=1000&amp;useExponentialBackOff=false"
                        duplex="true" networkTTL="{{$.TTL}}" conduitSubscriptions="{{$.Conduit}}"
                        suppressDuplicateTopicSubscriptions="true"/>
{{- end}}
    </networkConnectors>
{{- end}}
    <transportConnectors>
{{- range .In}}
      <transportConnector name="from-{{x .Name}}" uri="tcp://{{x .Addr}}"/>
{{- end}}
      <transportConnector name="stomp" uri="stomp://{{x .Stomp}}"/>
    </transportConnectors>
  </broker>
</beans>
`))

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), `"`, "&#34;")
}

func (d *amqDeployment) config(s *amqSite) (string, error) {
	type in struct{ Name, Addr string }
	var ins []in
	for _, from := range sortedKeys(s.in) {
		ins = append(ins, in{from, hostPort(d.place.Host(s.name), s.in[from])})
	}
	var b strings.Builder
	err := amqTemplate.Execute(&b, map[string]any{
		"Site": s.name, "Data": filepath.Join(s.dir, "data"), "Bridges": s.out, "In": ins,
		"Stomp": s.stomp, "TTL": d.ttl, "Conduit": !d.sys.opts.NoConduit,
	})
	return b.String(), err
}

func (d *amqDeployment) Info() Info {
	return Info{
		System:  "activemq",
		Version: d.version,
		Config: map[string]string{
			"java":                   d.java,
			"heap":                   strconv.Itoa(d.sys.opts.HeapMB) + " MB per broker",
			"delivery":               "non-persistent messages, non-durable topic subscriptions, no message store (Carzaniga09 §5.1.3)",
			"network":                "one broker per site; one duplex networkConnector per topology link, created by the link's first site",
			"networkTTL":             strconv.Itoa(d.ttl),
			"conduitSubscriptions":   strconv.FormatBool(!d.sys.opts.NoConduit),
			"suppressDuplicateTopic": "true",
			"clients":                "STOMP 1.2 (internal/testbed/stomp); one connection per site for its subscribers, one per publisher; selectors translated by systems.Selector",
			"destination":            ActiveMQTopic,
		},
		Files: d.files,
	}
}

// Ready waits until every link's bridge is up at both ends, then gives the
// advisory messages that carry subscriptions across bridges a second to
// arrive (ActiveMQ offers no way to observe them without JMX).
func (d *amqDeployment) Ready(ctx context.Context) error {
	err := poll(ctx, 200*time.Millisecond, func() (bool, string, error) {
		var missing []string
		for _, name := range d.order {
			s := d.sites[name]
			if err := s.proc.alive(); err != nil {
				return false, "", err
			}
			log, err := os.ReadFile(s.proc.logPath)
			if err != nil {
				return false, "", err
			}
			for _, n := range d.spec.Topology.Neighbors(name) {
				if !bytes.Contains(log, []byte("("+n.Broker.Name+") has been established")) {
					missing = append(missing, name+"→"+n.Broker.Name)
				}
			}
		}
		return len(missing) == 0, "bridges not established: " + strings.Join(missing, ", "), nil
	})
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return nil
	}
}

// Servers implements ServerLister: Client is the STOMP connector.
func (d *amqDeployment) Servers() []Server {
	var out []Server
	for _, name := range d.order {
		s := d.sites[name]
		out = append(out, Server{Site: name, PID: s.proc.cmd.Process.Pid, Client: s.stomp})
	}
	return out
}

func (d *amqDeployment) Links() LinkCounter {
	ports := map[int]Direction{}
	for _, name := range d.order {
		for from, port := range d.sites[name].in {
			ports[port] = Direction{From: from, To: name}
		}
	}
	return newSocketLinks(ports)
}

func (d *amqDeployment) Close() error {
	var procs []*process
	for _, name := range d.order {
		if s := d.sites[name]; s != nil {
			procs = append(procs, s.proc)
		}
	}
	stopAll(procs, 15*time.Second)
	return nil
}

func (d *amqDeployment) Connect(ctx context.Context, site string) (bench.Endpoint, error) {
	s, ok := d.sites[site]
	if !ok {
		return nil, fmt.Errorf("activemq: no site %q", site)
	}
	e := &amqEndpoint{d: d, site: site, addr: s.stomp}
	var err error
	if e.subConn, err = e.dial(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

type amqEndpoint struct {
	d          *amqDeployment
	site, addr string
	subConn    *stomp.Conn // shared by the site's subscribers
}

func (e *amqEndpoint) dial(ctx context.Context) (*stomp.Conn, error) {
	return stomp.Dial(ctx, e.addr, stomp.Options{
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return e.d.place.DialContext(ctx, e.site, network, addr)
		},
	})
}

func (e *amqEndpoint) Subscribe(ctx context.Context, p content.Predicate) (bench.Subscriber, error) {
	sel, err := Selector(p)
	if err != nil {
		return nil, fmt.Errorf("activemq: %w", err)
	}
	s, err := e.subConn.Subscribe(ctx, ActiveMQTopic, stomp.Header{Key: "selector", Value: sel})
	if err != nil {
		return nil, fmt.Errorf("activemq: subscribing with selector %q: %w", sel, err)
	}
	return amqSubscriber{s}, nil
}

func (e *amqEndpoint) NewPublisher(ctx context.Context) (bench.Publisher, error) {
	c, err := e.dial(ctx)
	if err != nil {
		return nil, err
	}
	// Cancelling ctx must unblock a Send stuck on a broker that stopped
	// reading (producer flow control): closing the connection does.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	return &amqPublisher{c: c, stop: stop}, nil
}

func (e *amqEndpoint) Close() error { return e.subConn.Close() }

type amqSubscriber struct{ s *stomp.Subscription }

func (s amqSubscriber) Next(ctx context.Context) ([]byte, error) {
	f, err := s.s.Next(ctx)
	if err != nil {
		return nil, err
	}
	return f.Body, nil
}

// Lost is 0: ActiveMQ does not tell a non-durable subscriber what it
// discarded; the oracle counts it as undelivered.
func (amqSubscriber) Lost() uint64   { return 0 }
func (s amqSubscriber) Close() error { return s.s.Unsubscribe() }

type amqPublisher struct {
	c    *stomp.Conn
	stop func() bool // stops closing c when the publisher's context ends
	sent atomic.Uint64
	once sync.Once
}

// amqReservedHeaders are STOMP headers ActiveMQ turns into JMS headers (or
// interprets) instead of message properties; an attribute so named would
// be lost or would change how the message is sent.
var amqReservedHeaders = map[string]bool{
	"destination": true, "content-length": true, "content-type": true, "receipt": true, "transaction": true,
	"persistent": true, "priority": true, "expires": true, "correlation-id": true, "reply-to": true,
	"type": true, "message-id": true, "timestamp": true, "subscription": true, "ack": true, "id": true,
	"selector": true, "transformation": true, "redelivered": true,
}

func (p *amqPublisher) Publish(m content.Message, payload []byte) error {
	headers, err := ActiveMQHeaders(m)
	if err != nil {
		return err
	}
	if err := p.c.Send(ActiveMQTopic, headers, payload); err != nil {
		return err
	}
	p.sent.Add(1)
	return nil
}

// ActiveMQHeaders are the STOMP headers a publisher sends m's attributes
// in: one message property per attribute, which selectors (Selector)
// read, and persistent:false (Carzaniga09 §5.1.3).
func ActiveMQHeaders(m content.Message) ([]stomp.Header, error) {
	headers := make([]stomp.Header, 0, m.Len()+1)
	headers = append(headers, stomp.Header{Key: "persistent", Value: "false"})
	for _, a := range m.Attributes() {
		if err := CheckIdentifier(a.Name); err != nil {
			return nil, fmt.Errorf("activemq: %w", err)
		}
		if amqReservedHeaders[a.Name] || strings.HasPrefix(a.Name, "activemq") {
			return nil, fmt.Errorf("activemq: attribute %q collides with a STOMP header ActiveMQ interprets", a.Name)
		}
		headers = append(headers, stomp.Header{Key: a.Name, Value: stompValue(a.Value)})
	}
	return headers, nil
}

// stompValue is the header text of a value: every property is a string
// over STOMP, and Selector writes literals that ActiveMQ compares with it.
func stompValue(v content.Value) string {
	switch v.Kind() {
	case content.KindString:
		return v.Str()
	case content.KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case content.KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return strconv.FormatBool(v.Bool())
	}
}

// Close disconnects with a receipt, which ActiveMQ sends once it has
// processed every frame before it.
func (p *amqPublisher) Close() (client.Summary, error) {
	var err error
	p.once.Do(func() {
		p.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = p.c.Disconnect(ctx)
	})
	return client.Summary{Accepted: p.sent.Load()}, err
}
