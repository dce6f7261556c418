//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// denied is how client-go and the API server word an RBAC denial: `events is forbidden: User
// "system:serviceaccount:…" cannot create resource "events" in API group ""`.
var denied = regexp.MustCompile(
	`is forbidden: User "[^"]*" cannot [a-z]+ resource|cannot [a-z]+ resource "[^"]*" in API group`)

// logWatch follows every container of every Pod in the release's namespace from its first line,
// restarts and short-lived Pods (the migration hook, helm test) included, so that a Pod the
// test deletes still has its whole log read.
type logWatch struct {
	k    *kube
	dir  string // one file per container, kept for reading after a failure
	mu   sync.Mutex
	seen map[string]bool // pod uid/container/restart count
	bad  []string
	wg   sync.WaitGroup
	// uninstalling is set when helm uninstall starts: Helm deletes the operator's Roles while its
	// Pods still stop, so denials from then on say nothing about the chart's RBAC.
	uninstalling atomic.Bool
	uninstallAt  time.Time
	// started is when the watch began: what the API server logged before is an earlier test's.
	started time.Time
	// said is every line of codeport's Pods other than the request lines: which Pod, what, when.
	said []logLine
}

// logLine is one line a codeport process logged besides its request lines.
type logLine struct {
	pod, msg string
	at       time.Time
}

func watchLogs(ctx context.Context, t *testing.T, k *kube) *logWatch {
	t.Helper()
	lw := &logWatch{k: k, dir: t.TempDir(), seen: map[string]bool{}, started: time.Now()}
	if d := os.Getenv("E2E_LOG_DIR"); d != "" {
		lw.dir = d
	}
	w, err := k.k8s.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace))
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	lw.wg.Add(1)
	go func() {
		defer lw.wg.Done()
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				lw.follow(ctx, p)
			}
		}
	}()
	return lw
}

// follow starts one reader per container that has started and is not yet read.
func (lw *logWatch) follow(ctx context.Context, p *corev1.Pod) {
	statuses := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	// The test's own Jobs (e2e-*) are not the release's components.
	if strings.HasPrefix(p.Name, "e2e-") {
		return
	}
	// codeport's own lines are held to its rules, and the Pooler's to its sizing; CloudNativePG's
	// other lines and the object store's are kept for reading.
	var check func(name, line string)
	switch {
	case p.Labels["app.kubernetes.io/name"] == "codeport":
		check = lw.check
	case p.Labels["cnpg.io/poolerName"] != "":
		check = lw.checkPooler
	}
	for _, cs := range statuses {
		if cs.State.Running == nil && cs.State.Terminated == nil {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", p.UID, cs.Name, cs.RestartCount)
		lw.mu.Lock()
		if lw.seen[key] {
			lw.mu.Unlock()
			continue
		}
		lw.seen[key] = true
		lw.mu.Unlock()
		name := fmt.Sprintf("%s_%s_%d", p.Name, cs.Name, cs.RestartCount)
		lw.wg.Add(1)
		go func() {
			defer lw.wg.Done()
			lw.read(ctx, p.Name, cs.Name, name, check)
		}()
	}
}

func (lw *logWatch) read(ctx context.Context, pod, container, name string, check func(name, line string)) {
	stream, err := lw.k.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, Follow: true}).Stream(ctx)
	if err != nil {
		// A Pod deleted before its log was opened: nothing was missed that the kubelet still has.
		return
	}
	defer stream.Close()
	f, err := os.Create(lw.dir + "/" + name + ".log")
	if err != nil {
		lw.flag("%s: %v", name, err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(f, line)
		if check != nil {
			check(name, line)
		}
	}
}

// check holds one log line to the rules: a JSON object, and no RBAC denial.
func (lw *logWatch) check(name, line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		lw.flag("%s: a line that is not a JSON object: %.300s", name, line)
	}
	msg, _ := obj["msg"].(string)
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(obj["time"]))
	if msg != "request" && err == nil {
		lw.mu.Lock()
		lw.said = append(lw.said, logLine{pod: strings.Split(name, "_")[0], msg: msg, at: at})
		lw.mu.Unlock()
	}
	if denied.MatchString(line) && !lw.uninstalling.Load() {
		lw.flag("%s: a denied verb: %.300s", name, line)
	}
}

// checkPooler flags a client of PgBouncer that waited for a server connection until PgBouncer gave
// up on it (query_wait_timeout): the chart sizes the Pooler so that every session codeport's
// pools may open has one, so a wait ends when the primary answers, never on a full pool.
func (lw *logWatch) checkPooler(name, line string) {
	if strings.Contains(line, "query_wait_timeout") && strings.Contains(line, "closing because") {
		lw.flag("%s: a client waited for a server connection until PgBouncer gave up: %.300s", name, line)
	}
}

func (lw *logWatch) flag(format string, args ...any) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.bad = append(lw.bad, fmt.Sprintf(format, args...))
}

// findings is what was flagged so far (the readers keep running).
func (lw *logWatch) findings() []string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return append([]string(nil), lw.bad...)
}

// startUninstall marks the moment helm uninstall starts, for the log and audit checks.
func (lw *logWatch) startUninstall() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !lw.uninstalling.Load() {
		lw.uninstallAt = time.Now()
		lw.uninstalling.Store(true)
	}
}

// repeated names each message that a Pod of those "of" selects logged more than limit times in
// [from, to): a line per failed request while the database is away, where one per interval is
// enough.
func (lw *logWatch) repeated(of func(pod string) bool, from, to time.Time, limit int) []string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	counts := map[string]int{}
	for _, l := range lw.said {
		if of(l.pod) && !l.at.Before(from) && l.at.Before(to) {
			counts[l.pod+": "+l.msg]++
		}
	}
	var over []string
	for what, n := range counts {
		if n > limit {
			over = append(over, fmt.Sprintf("%s (%d lines)", what, n))
		}
	}
	slices.Sort(over)
	return over
}
