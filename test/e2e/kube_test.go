package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dripmesh/drip/internal/bench"

	"github.com/dripmesh/drip/internal/topology"
)

// poll is how often the suite looks again while it waits (a variable for
// the tests against a fake API server).
var poll = 2 * time.Second

func (c *cluster) createNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "drip-e2e"}}}
	_, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

func (c *cluster) deleteNamespace(ctx context.Context, name string) error {
	err := c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *cluster) brokerPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: brokerLabels})
	if err != nil {
		return nil, err
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// waitBrokersReady waits until n broker pods are Ready, and gives up at
// once on a container that cannot start.
func (c *cluster) waitBrokersReady(ctx context.Context, ns string, n int, timeout time.Duration) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.brokerPods(ctx, ns)
		if err != nil {
			return false, err
		}
		var fatal error
		last, fatal = podProblems(pods, n)
		return len(last) == 0, fatal
	})
	if err != nil && len(last) > 0 {
		return fmt.Errorf("%w; not ready: %s", err, strings.Join(last, "; "))
	}
	return err
}

// fatalWaiting are reasons a container waits for that waiting longer
// cannot cure.
var fatalWaiting = []string{"ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError"}

// podProblems says which of want broker pods are not ready and why, and
// returns an error for a pod that will never become ready.
func podProblems(pods []corev1.Pod, want int) ([]string, error) {
	var problems []string
	if len(pods) != want {
		problems = append(problems, fmt.Sprintf("%d of %d broker pods exist", len(pods), want))
	}
	for _, p := range pods {
		if podReady(&p) {
			continue
		}
		why := []string{string(p.Status.Phase)}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				w := cs.State.Waiting
				if slices.Contains(fatalWaiting, w.Reason) {
					return problems, fmt.Errorf("pod %s: container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message)
				}
				why = append(why, fmt.Sprintf("%s waiting (%s)", cs.Name, w.Reason))
			case cs.State.Terminated != nil:
				why = append(why, fmt.Sprintf("%s terminated (%s, exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
			case !cs.Ready:
				why = append(why, cs.Name+" not ready")
			}
			if cs.RestartCount > 0 {
				why = append(why, fmt.Sprintf("%s restarted %d times", cs.Name, cs.RestartCount))
			}
		}
		problems = append(problems, p.Name+": "+strings.Join(why, ", "))
	}
	return problems, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scrape reads a pod's /metrics through the API server's pod proxy, which
// works from outside the cluster network without a port-forward.
func (c *cluster) scrape(ctx context.Context, ns, pod string, port int) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := c.client.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(port), "metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping %s:%d: %w", pod, port, err)
	}
	m, err := parseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s:%d: %w", pod, port, err)
	}
	return m, nil
}

// waitConverged waits until every broker's link-state database reaches
// every router (Carzaniga09 §2.2: the unicast routes B-DRP forwards on).
func (c *cluster) waitConverged(ctx context.Context, ns string, n int, timeout time.Duration) error {
	return c.waitRoutersKnown(ctx, ns, n, n, timeout)
}

// waitRoutersKnown waits until each of the n brokers of ns knows routers
// routers: those of its mesh, which in a mesh across clusters are more than
// the namespace's.
func (c *cluster) waitRoutersKnown(ctx context.Context, ns string, n, routers int, timeout time.Duration) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		last = last[:0]
		for i := range n {
			m, err := c.scrape(ctx, ns, brokerName(i), metricsPort)
			if err != nil {
				last = append(last, err.Error())
				continue
			}
			if known, _ := m.value("drip_routers_known", nil); int(known) != routers {
				last = append(last, fmt.Sprintf("%s knows %d of %d routers", brokerName(i), int(known), routers))
			}
		}
		return len(last) == 0, nil
	})
	if err != nil && len(last) > 0 {
		return fmt.Errorf("%w: %s", err, strings.Join(last, "; "))
	}
	return err
}

// convergencePoll is how often measureConvergence looks at each broker:
// the measurement's resolution.
var convergencePoll = 200 * time.Millisecond

// convergence is when the last broker process of a fresh mesh started and
// when the suite first saw every broker know every router.
type convergence struct {
	LastStart time.Time            // the latest process_start_time_seconds of the brokers
	Converged time.Time            // the latest of Seen
	Seen      map[string]time.Time // by broker: the first scrape that found it knowing every router
}

// Took is from the last broker's start to convergence.
func (c convergence) Took() time.Duration { return c.Converged.Sub(c.LastStart) }

// measureConvergence watches a mesh that is starting until n brokers run
// and every one knows n routers. Each broker is scraped every
// convergencePoll on its own, and the moment it is first seen knowing
// every router is the end of that scrape: one slow scrape (the API
// server's pod proxy on a loaded node) delays only its broker's reading.
// The start times are the brokers' own (process_start_time_seconds, from
// the node's clock), so on a single-node cluster both ends of the interval
// come from one clock. A container that cannot start fails it at once.
func (c *cluster) measureConvergence(ctx context.Context, ns string, n int, timeout time.Duration) (convergence, error) {
	res := convergence{Seen: map[string]time.Time{}}
	starts := map[string]time.Time{}
	var last []string
	err := wait.PollUntilContextTimeout(ctx, convergencePoll, timeout, true, func(ctx context.Context) (bool, error) {
		last = last[:0]
		pods, err := c.brokerPods(ctx, ns)
		if err != nil {
			return false, err
		}
		if len(pods) != n {
			last = append(last, fmt.Sprintf("%d of %d broker pods exist", len(pods), n))
			return false, nil
		}
		if _, fatal := podProblems(pods, n); fatal != nil {
			return false, fatal
		}
		type scraped struct {
			m   metrics
			at  time.Time
			err error
		}
		results := make([]scraped, len(pods))
		var wg sync.WaitGroup
		for i, p := range pods {
			if _, ok := res.Seen[p.Name]; ok {
				continue
			}
			if p.Status.Phase != corev1.PodRunning {
				results[i].err = fmt.Errorf("%s is %s", p.Name, p.Status.Phase)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				results[i].m, results[i].err = c.scrape(sctx, ns, p.Name, metricsPort)
				results[i].at = time.Now()
			}()
		}
		wg.Wait()
		for i, r := range results {
			name := pods[i].Name
			if _, ok := res.Seen[name]; ok {
				continue
			}
			if r.err != nil {
				last = append(last, r.err.Error())
				continue
			}
			start, ok := r.m.value("process_start_time_seconds", nil)
			if !ok {
				return false, fmt.Errorf("%s exports no process_start_time_seconds", name)
			}
			starts[name] = time.Unix(0, int64(start*1e9))
			if known, _ := r.m.value("drip_routers_known", nil); int(known) != n {
				last = append(last, fmt.Sprintf("%s knows %d of %d routers", name, int(known), n))
				continue
			}
			res.Seen[name] = r.at
		}
		return len(res.Seen) == n, nil
	})
	for _, t := range starts {
		if t.After(res.LastStart) {
			res.LastStart = t
		}
	}
	for _, t := range res.Seen {
		if t.After(res.Converged) {
			res.Converged = t
		}
	}
	if err != nil && len(last) > 0 {
		return res, fmt.Errorf("%w: %s", err, strings.Join(last, "; "))
	}
	return res, err
}

// linkLog is what a broker logged about its links, for a convergence that
// took too long: when each came up, and what the dials that failed said.
func (c *cluster) linkLog(ctx context.Context, ns, pod string) string {
	return c.brokerLog(ctx, ns, pod, 200, 200, func(line string) bool {
		return strings.Contains(line, `"link up"`) || strings.Contains(line, "cannot reach peer") ||
			strings.Contains(line, "broker starting") || strings.Contains(line, "EndpointSlices")
	})
}

// brokerLog returns up to keep of the last tail lines of a broker's log
// that match, or the error that kept it from reading them.
func (c *cluster) brokerLog(ctx context.Context, ns, pod string, tail int64, keep int, match func(string) bool) string {
	log, err := c.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "broker", TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(log), "\n") {
		if keep > 0 && match(line) {
			b.WriteString(line)
			b.WriteByte('\n')
			keep--
		}
	}
	return b.String()
}

// topology reads the topology the chart rendered, so the suite checks the
// live links against what the chart said, not against its own idea of it.
func (c *cluster) topology(ctx context.Context, ns string) (*topology.Topology, error) {
	cm, err := c.client.CoreV1().ConfigMaps(ns).Get(ctx, topologyCM, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return topology.Parse([]byte(cm.Data["topology.yaml"]))
}

// runJob creates job, waits for it to finish, and returns its pod's log and
// whether it succeeded.
func (c *cluster) runJob(ctx context.Context, ns string, job *batchv1.Job, timeout time.Duration) (log []byte, ok bool, err error) {
	if _, err := c.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, false, err
	}
	return c.waitJob(ctx, ns, job, timeout)
}

// jobPodRunning waits until job's pod runs and returns when it started.
func (c *cluster) jobPodRunning(ctx context.Context, ns string, job *batchv1.Job, timeout time.Duration) (time.Time, error) {
	var started time.Time
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "drip-e2e/job=" + job.Name})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					started = cs.State.Running.StartedAt.Time
					return true, nil
				}
				if cs.State.Terminated != nil {
					return false, fmt.Errorf("job %s: pod %s ended before the suite saw it run (%s, exit %d)", job.Name, p.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return started, fmt.Errorf("job %s: waiting for its pod to run: %w", job.Name, err)
	}
	return started, nil
}

// waitJob waits for a created job to finish, and returns its pod's log and
// whether it succeeded.
func (c *cluster) waitJob(ctx context.Context, ns string, job *batchv1.Job, timeout time.Duration) (log []byte, ok bool, err error) {
	jobs := c.client.BatchV1().Jobs(ns)
	err = wait.PollUntilContextTimeout(ctx, poll, timeout, false, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok = j.Status.Succeeded > 0
		return ok || j.Status.Failed > 0 || jobFailed(j), nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("job %s: %w", job.Name, err)
	}
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "drip-e2e/job=" + job.Name})
	if err != nil {
		return nil, ok, err
	}
	if len(pods.Items) == 0 {
		return nil, ok, fmt.Errorf("job %s finished without a pod", job.Name)
	}
	container := job.Spec.Template.Spec.Containers[0].Name
	log, err = c.settledLog(ctx, ns, pods.Items[0].Name, container)
	return log, ok, err
}

// settledLog reads a finished container's log once it has stopped
// growing. The pod reports its container terminated as soon as the
// process exits, while the runtime may still be copying the last of its
// output into the log file: a read at once cut a bench report of 80
// subscribers mid-object.
func (c *cluster) settledLog(ctx context.Context, ns, pod, container string) ([]byte, error) {
	var last []byte
	for range 10 {
		log, err := c.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		if last != nil && bytes.Equal(log, last) {
			return log, nil
		}
		last = log
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return last, nil
}

func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// dump logs what there is to know about a namespace whose test failed:
// pods and their containers, every container's log (and the previous
// one's after a restart), the events, and the brokers' and sidecars'
// metrics.
func (c *cluster) dump(ctx context.Context, t *testing.T, ns string, netem bool) {
	t.Helper()
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("dump: listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("dump: pod %s on %s: %s", p.Name, p.Spec.NodeName, podLine(&p))
	}
	var tailLines int64 = 300
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			for _, previous := range []bool{false, true} {
				if previous && cs.RestartCount == 0 {
					continue
				}
				opts := &corev1.PodLogOptions{Container: cs.Name, Previous: previous, TailLines: &tailLines}
				log, err := c.client.CoreV1().Pods(ns).GetLogs(p.Name, opts).DoRaw(ctx)
				which := ""
				if previous {
					which = " (previous)"
				}
				if err != nil {
					t.Logf("dump: log of %s/%s%s: %v", p.Name, cs.Name, which, err)
					continue
				}
				t.Logf("dump: log of %s/%s%s, last %d lines:\n%s", p.Name, cs.Name, which, tailLines, log)
			}
		}
	}
	events, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("dump: listing events: %v", err)
	} else {
		items := events.Items
		sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Before(eventTime(&items[j])) })
		var b strings.Builder
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s (×%d)\n", eventTime(&e).Format(time.TimeOnly), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
		}
		t.Logf("dump: events:\n%s", b.String())
	}
	for _, p := range pods.Items {
		if p.Labels["app.kubernetes.io/component"] != "broker" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		ports := []int{metricsPort}
		if netem {
			ports = append(ports, netemPort)
		}
		for _, port := range ports {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			body, err := c.client.CoreV1().Pods(ns).ProxyGet("http", p.Name, strconv.Itoa(port), "metrics", nil).DoRaw(ctx)
			cancel()
			if err != nil {
				t.Logf("dump: metrics of %s:%d: %v", p.Name, port, err)
				continue
			}
			t.Logf("dump: metrics of %s:%d:\n%s", p.Name, port, dripLines(body))
		}
	}
}

// dripLines keeps drip's own samples: the Go runtime's would drown them.
func dripLines(body []byte) string {
	var b strings.Builder
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "drip_") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// podLine is a pod's state in one line.
func podLine(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	if podReady(p) {
		parts = append(parts, "ready")
	}
	for _, cs := range p.Status.ContainerStatuses {
		s := cs.Name
		switch {
		case cs.State.Running != nil:
			s += " running"
		case cs.State.Waiting != nil:
			s += " waiting: " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			s += fmt.Sprintf(" terminated: %s (exit %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(", %d restarts", cs.RestartCount)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func TestPodProblems(t *testing.T) {
	ready := func(name string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.PodStatus{
				Phase:             corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "broker", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			},
		}
	}
	waiting := func(name, container, reason string, restarts int32) corev1.Pod {
		p := ready(name)
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, RestartCount: restarts, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details"}}}}
		return p
	}

	problems, err := podProblems([]corev1.Pod{ready("drip-0"), ready("drip-1")}, 2)
	require.NoError(t, err)
	assert.Empty(t, problems)

	problems, err = podProblems([]corev1.Pod{ready("drip-0")}, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"1 of 2 broker pods exist"}, problems)

	problems, err = podProblems([]corev1.Pod{ready("drip-0"), waiting("drip-1", "netem", "CrashLoopBackOff", 3)}, 2)
	require.NoError(t, err, "a crash loop may still recover")
	assert.Equal(t, []string{"drip-1: Pending, netem waiting (CrashLoopBackOff), netem restarted 3 times"}, problems)

	_, err = podProblems([]corev1.Pod{waiting("drip-0", "broker", "ErrImageNeverPull", 0)}, 1)
	require.ErrorContains(t, err, "pod drip-0: container broker: ErrImageNeverPull: details")
}

func TestDripLines(t *testing.T) {
	body := "# HELP go_goroutines x\ngo_goroutines 12\ndrip_routers_known 4\n# TYPE drip_link_up gauge\ndrip_link_up{peer=\"drip-1\"} 1\n"
	assert.Equal(t, "drip_routers_known 4\ndrip_link_up{peer=\"drip-1\"} 1\n", dripLines([]byte(body)))
}

func TestPodLine(t *testing.T) {
	p := corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "broker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "netem", RestartCount: 2, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
		},
	}}
	assert.Equal(t, "Running; broker running; netem terminated: Error (exit 1), 2 restarts", podLine(&p))
}

// fastPoll makes the waits of a test against the fake API server quick.
func fastPoll(t *testing.T) {
	old := poll
	poll = 10 * time.Millisecond
	t.Cleanup(func() { poll = old })
}

// rawResponse is a pod proxy response of the fake API server.
type rawResponse struct {
	body []byte
	err  error
}

func (r rawResponse) DoRaw(context.Context) ([]byte, error) { return r.body, r.err }
func (r rawResponse) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(r.body))), r.err
}

func readyBroker(ns string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: brokerName(i), Namespace: ns, Labels: map[string]string{
			"app.kubernetes.io/instance": release, "app.kubernetes.io/component": "broker",
		}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

func TestWaitBrokersReadyAgainstAFakeAPIServer(t *testing.T) {
	fastPoll(t)
	ctx := t.Context()
	other := readyBroker("ns", 9)
	other.Labels["app.kubernetes.io/component"] = "selftest" // not selected
	client := fake.NewClientset(readyBroker("ns", 0), readyBroker("ns", 1), other)
	c := &cluster{client: client}
	require.NoError(t, c.waitBrokersReady(ctx, "ns", 2, time.Second))

	err := c.waitBrokersReady(ctx, "ns", 3, 100*time.Millisecond)
	require.ErrorContains(t, err, "not ready: 2 of 3 broker pods exist")

	stuck := readyBroker("ns", 2)
	stuck.Status.Conditions = nil
	stuck.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "broker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image drip:dev is not present"}}}}
	_, err = client.CoreV1().Pods("ns").Create(ctx, stuck, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	err = c.waitBrokersReady(ctx, "ns", 3, time.Minute)
	require.ErrorContains(t, err, "pod drip-2: container broker: ErrImageNeverPull: image drip:dev is not present")
	require.Less(t, time.Since(start), 30*time.Second, "an image that is not there fails at once, not at the timeout")
}

func TestWaitConvergedAgainstAFakeAPIServer(t *testing.T) {
	fastPoll(t)
	client := fake.NewClientset()
	scrapes := map[string]int{}
	client.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		p := a.(k8stesting.ProxyGetAction)
		require.Equal(t, strconv.Itoa(metricsPort), p.GetPort())
		require.Equal(t, "metrics", p.GetPath())
		scrapes[p.GetName()]++
		// drip-2 learns of the third router on its third scrape.
		known := 3
		if p.GetName() == "drip-2" && scrapes["drip-2"] < 3 {
			known = 2
		}
		return true, rawResponse{body: fmt.Appendf(nil, "drip_routers_known %d\n", known)}, nil
	})
	c := &cluster{client: client}
	require.NoError(t, c.waitConverged(t.Context(), "ns", 3, 5*time.Second))
	assert.Equal(t, 3, scrapes["drip-2"])

	scrapes = map[string]int{}
	err := c.waitConverged(t.Context(), "ns", 4, 100*time.Millisecond)
	require.ErrorContains(t, err, "drip-0 knows 3 of 4 routers")
}

// TestRunJobAgainstAFakeAPIServer plays the Job controller: the Job the
// suite creates succeeds at once with a pod labelled from its template,
// whose log is a bench report. The suite must find that pod and read the
// bench container's log.
func TestRunJobAgainstAFakeAPIServer(t *testing.T) {
	fastPoll(t)
	client := fake.NewClientset()
	rep := bench.Report{Totals: bench.Totals{Sent: 100, Ideal: 400, Delivered: 400}}
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		job.Status.Succeeded = 1
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x7k2p", Namespace: a.GetNamespace(), Labels: job.Spec.Template.Labels}}
		return false, nil, client.Tracker().Add(pod)
	})
	client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		g, ok := a.(k8stesting.GenericAction)
		if !ok || a.GetSubresource() != "log" {
			return false, nil, nil
		}
		require.Equal(t, "bench", g.GetValue().(*corev1.PodLogOptions).Container)
		return true, &runtime.Unknown{Raw: append(js, "\ndrip bench: sent 100\n"...)}, nil
	})
	c := &cluster{client: client}
	b := defaultBench()
	job := benchJob("bench", imageRef{"drip", "dev"}, corev1.PullNever, benchArgs(b, []string{brokerAddr("ns", 0)}), b.timeout())
	log, ok, err := c.runJob(t.Context(), "ns", job, 5*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := parseReport(log)
	require.NoError(t, err)
	assert.Equal(t, rep.Totals, got.Totals)
	assert.Empty(t, checkReport(got, 0.99))
}

func TestRunJobReportsAFailedJob(t *testing.T) {
	fastPoll(t)
	client := fake.NewClientset()
	client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-a", Namespace: a.GetNamespace(), Labels: job.Spec.Template.Labels}}
		return false, nil, client.Tracker().Add(pod)
	})
	c := &cluster{client: client}
	job := benchJob("bench", imageRef{"drip", "dev"}, corev1.PullNever, []string{"bench"}, time.Minute)
	log, ok, err := c.runJob(t.Context(), "ns", job, 5*time.Second)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, "fake logs", string(log), "the log of a failed job is still read")
}

// TestMeasureConvergenceAgainstAFakeAPIServer: each broker's own first
// converged reading counts, one that is slow to converge sets the end, and
// the start is the latest broker process's.
func TestMeasureConvergenceAgainstAFakeAPIServer(t *testing.T) {
	old := convergencePoll
	convergencePoll = 10 * time.Millisecond
	t.Cleanup(func() { convergencePoll = old })
	var pods []runtime.Object
	for i := range 3 {
		pods = append(pods, readyBroker("ns", i))
	}
	client := fake.NewClientset(pods...)
	var mu sync.Mutex
	scrapes := map[string]int{}
	client.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		name := a.(k8stesting.ProxyGetAction).GetName()
		mu.Lock()
		defer mu.Unlock()
		scrapes[name]++
		known := 3
		if name == "drip-1" && scrapes[name] < 5 {
			known = 2 // drip-1 converges on its fifth scrape
		}
		start := 1000 + map[string]int{"drip-0": 0, "drip-1": 2, "drip-2": 1}[name]
		return true, rawResponse{body: fmt.Appendf(nil, "drip_routers_known %d\nprocess_start_time_seconds %d\n", known, start)}, nil
	})
	c := &cluster{client: client}
	conv, err := c.measureConvergence(t.Context(), "ns", 3, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1002, 0), conv.LastStart)
	require.Len(t, conv.Seen, 3)
	assert.Equal(t, conv.Seen["drip-1"], conv.Converged, "the last broker to converge sets the time")
	assert.True(t, conv.Seen["drip-0"].Before(conv.Seen["drip-1"]))
	mu.Lock()
	assert.Equal(t, 1, scrapes["drip-0"], "a converged broker is not scraped again")
	assert.Equal(t, 5, scrapes["drip-1"])
	mu.Unlock()

	_, err = c.measureConvergence(t.Context(), "ns", 4, 100*time.Millisecond)
	require.ErrorContains(t, err, "3 of 4 broker pods exist")
}
