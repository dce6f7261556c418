package kubectlplugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
)

// ReportOptions says what `kubectl codeport report` collects.
type ReportOptions struct {
	// Namespace holds the partners' resources; SystemNamespace the operator's and the APIs' Pods.
	Namespace, SystemNamespace string
	// TailLines is how many of each container's last log lines are kept.
	TailLines int64
	// Now stamps the bundle.
	Now time.Time
}

// podSelector picks the chart's Pods (operator, APIs, migration Job) in the system namespace.
const podSelector = "app.kubernetes.io/name=codeport"

// codeportPath is where the image puts the binary (the Dockerfile's ENTRYPOINT).
const codeportPath = "/usr/local/bin/codeport"

// bundle is a support bundle being written: every file passes Redact on its way in, so nothing
// written through it can skip redaction.
type bundle struct {
	tw    *tar.Writer
	mtime time.Time
	notes []string
}

func (b *bundle) add(name string, data []byte) error {
	data = Redact(data)
	hdr := &tar.Header{Name: "codeport-report/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: b.mtime}
	if err := b.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("bundle %s: %w", name, err)
	}
	if _, err := b.tw.Write(data); err != nil {
		return fmt.Errorf("bundle %s: %w", name, err)
	}
	return nil
}

// note records what could not be collected, and why, in the bundle's NOTES.txt.
func (b *bundle) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

func (b *bundle) addYAML(name string, obj any) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return b.add(name, data)
}

// WriteReport writes a support bundle (a gzipped tar) to w: codeport's resources of
// opts.Namespace, the names of the Secrets they refer to (never their data), the events of
// both namespaces, the chart's Pods and their logs, and `codeport migrate status` from an API
// Pod. What cannot be had (no kubelet to serve logs, no right to exec) is said in NOTES.txt
// instead of failing the bundle. Every file is redacted (Redact, redactPod).
func WriteReport(ctx context.Context, c *cluster, opts ReportOptions, w io.Writer) error {
	gz := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(gz), mtime: opts.Now}
	collectResources(ctx, c, opts, b)
	collectEvents(ctx, c, opts, b)
	pods := collectPods(ctx, c, opts, b)
	collectLogs(ctx, c, opts, b, pods)
	collectMigrateStatus(ctx, c, opts, b, pods)
	summary := fmt.Sprintf("codeport support bundle\nnamespace: %s\nsystem namespace: %s\ncreated: %s\n\n"+
		"Secrets are named, never included; keys, tokens, passwords, webhook secrets and codes are "+
		"redacted.\n\nNOTES\n", opts.Namespace, opts.SystemNamespace, opts.Now.UTC().Format(time.RFC3339))
	if len(b.notes) == 0 {
		b.notes = append(b.notes, "everything was collected")
	}
	if err := b.add("NOTES.txt", []byte(summary+"- "+strings.Join(b.notes, "\n- ")+"\n")); err != nil {
		return err
	}
	if err := b.tw.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// collectResources writes each kind's list, without managedFields (noise), and the names of
// the Secrets the resources refer to: the bundle never reads a Secret.
func collectResources(ctx context.Context, c *cluster, opts ReportOptions, b *bundle) {
	res := &resources{}
	for _, l := range res.lists() {
		if err := c.client.List(ctx, l.list, client.InNamespace(opts.Namespace)); err != nil {
			b.note("%s of %s: not collected: %v", l.kind, opts.Namespace, err)
			continue
		}
		_ = meta.EachListItem(l.list, func(o runtime.Object) error {
			if a, err := meta.Accessor(o); err == nil {
				a.SetManagedFields(nil)
			}
			return nil
		})
		if err := b.addYAML("resources/"+l.kind+".yaml", l.list); err != nil {
			b.note("%s: %v", l.kind, err)
		}
	}
	secrets := map[string][]string{}
	for _, k := range res.apiKeys.Items {
		secrets[k.Spec.SecretName] = append(secrets[k.Spec.SecretName], "key of ApiKey "+k.Name)
	}
	for _, p := range res.partners.Items {
		for _, wh := range webhooks(&p) {
			secrets[wh.SecretRef.Name] = append(secrets[wh.SecretRef.Name], "webhook secret of Partner "+p.Name)
		}
	}
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString("Secrets the resources refer to (names only; their data is never read):\n")
	for _, name := range names {
		fmt.Fprintf(&sb, "%s\t%s\n", name, strings.Join(secrets[name], ", "))
	}
	if err := b.add("secrets.txt", []byte(sb.String())); err != nil {
		b.note("secrets.txt: %v", err)
	}
}

// webhooks are a Partner's webhook settings, its own and each environment's.
func webhooks(p *v1alpha1.Partner) []*v1alpha1.WebhookSpec {
	var out []*v1alpha1.WebhookSpec
	if p.Spec.Webhook != nil {
		out = append(out, p.Spec.Webhook)
	}
	if e := p.Spec.Environments; e != nil {
		for _, a := range []*v1alpha1.AccessPolicy{e.Sandbox, e.Production} {
			if a != nil && a.Webhook != nil {
				out = append(out, a.Webhook)
			}
		}
	}
	return out
}

func collectEvents(ctx context.Context, c *cluster, opts ReportOptions, b *bundle) {
	for _, ns := range uniq(opts.Namespace, opts.SystemNamespace) {
		var events corev1.EventList
		if err := c.client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			b.note("events of %s: not collected: %v", ns, err)
			continue
		}
		sort.SliceStable(events.Items, func(i, j int) bool {
			return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
		})
		var sb strings.Builder
		for _, e := range events.Items {
			fmt.Fprintf(&sb, "%s\t%s\t%s\t%s/%s\t%s\tx%d\n", eventTime(&e).UTC().Format(time.RFC3339), e.Type,
				e.Reason, strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, oneLine(e.Message), max(e.Count, 1))
		}
		if err := b.add("events/"+ns+".txt", []byte(sb.String())); err != nil {
			b.note("events of %s: %v", ns, err)
		}
	}
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func uniq(names ...string) []string {
	var out []string
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// collectPods writes the chart's Pods of the system namespace, their sensitive environment
// values blanked, and returns them.
func collectPods(ctx context.Context, c *cluster, opts ReportOptions, b *bundle) []corev1.Pod {
	pods, err := c.core.CoreV1().Pods(opts.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		b.note("Pods of %s: not collected: %v", opts.SystemNamespace, err)
		return nil
	}
	if len(pods.Items) == 0 {
		b.note("no Pods labelled %s in %s: is codeport installed there (--system-namespace)?", podSelector,
			opts.SystemNamespace)
	}
	for i := range pods.Items {
		pods.Items[i].ManagedFields = nil
		redactPod(&pods.Items[i])
	}
	pods.Kind, pods.APIVersion = "PodList", "v1"
	if err := b.addYAML("pods.yaml", pods); err != nil {
		b.note("pods.yaml: %v", err)
	}
	return pods.Items
}

// collectLogs keeps the last TailLines of every container of the Pods, through the log
// subresource; a Pod without a kubelet to serve it gets a note instead.
func collectLogs(ctx context.Context, c *cluster, opts ReportOptions, b *bundle, pods []corev1.Pod) {
	for _, p := range pods {
		for _, ctr := range p.Spec.Containers {
			if p.Spec.NodeName == "" {
				// The API server answers an unscheduled Pod's logs with an empty body, not an error.
				b.note("logs of %s/%s: not available: the Pod is not scheduled to a node", p.Name, ctr.Name)
				continue
			}
			logs, err := c.core.CoreV1().Pods(p.Namespace).GetLogs(p.Name,
				&corev1.PodLogOptions{Container: ctr.Name, TailLines: &opts.TailLines, Timestamps: true}).DoRaw(ctx)
			if err != nil {
				b.note("logs of %s/%s: not available: %v", p.Name, ctr.Name, err)
				continue
			}
			if err := b.add("logs/"+p.Name+"/"+ctr.Name+".log", logs); err != nil {
				b.note("logs of %s/%s: %v", p.Name, ctr.Name, err)
			}
		}
	}
}

// collectMigrateStatus runs `codeport migrate status` in a running API Pod, which has the
// database's URL in its environment, through the exec subresource: the plugin never holds
// database credentials itself.
func collectMigrateStatus(ctx context.Context, c *cluster, opts ReportOptions, b *bundle, pods []corev1.Pod) {
	pod := apiPod(pods)
	if pod == nil {
		b.note("migrate status: not collected: no running API Pod in %s", opts.SystemNamespace)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := execIn(ctx, c, pod, "api", []string{codeportPath, "migrate", "status"}, &stdout, &stderr)
	if err != nil {
		b.note("migrate status: exec in %s failed: %v %s", pod.Name, err, strings.TrimSpace(stderr.String()))
		return
	}
	out := fmt.Sprintf("$ codeport migrate status   (in Pod %s)\n%s%s", pod.Name, stdout.String(), stderr.String())
	if err := b.add("migrate-status.txt", []byte(out)); err != nil {
		b.note("migrate status: %v", err)
	}
}

// apiPod is a running API Pod of the chart (component api-production or api-sandbox), or nil.
func apiPod(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		p := &pods[i]
		if strings.HasPrefix(p.Labels["app.kubernetes.io/component"], "api-") && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	return nil
}

// execIn runs command in a container of pod as kubectl exec does: over WebSockets, falling back
// to SPDY where a proxy or an older API server refuses the upgrade.
func execIn(ctx context.Context, c *cluster, pod *corev1.Pod, container string, command []string,
	stdout, stderr io.Writer,
) error {
	req := c.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Container: container, Command: command,
		Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.config, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.config, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}

func newReportCommand(flags *kubeFlags) *cobra.Command {
	opts := ReportOptions{}
	var output string
	cmd := &cobra.Command{
		Use:   "report -o bundle.tar.gz",
		Short: "Write a support bundle: resources, events, Pods, logs and migrate status, redacted",
		Long: `Write a support bundle (a gzipped tar) for a namespace's partners: codeport's resources, the
names of the Secrets they refer to (never their data), the events of the namespace and of
--system-namespace, the chart's Pods there with their logs, and 'codeport migrate status' run in
an API Pod. API keys, bearer tokens, passwords in URLs, webhook secrets and redemption codes are
redacted from every file. What cannot be collected is said in the bundle's NOTES.txt.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return errors.New("--output (-o) names the bundle to write, e.g. -o bundle.tar.gz")
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			opts.Namespace, opts.Now = c.namespace, time.Now()
			f, err := os.OpenFile(output, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("bundle: %w", err)
			}
			if err := WriteReport(cmd.Context(), c, opts, f); err != nil {
				_ = f.Close()
				_ = os.Remove(output) // half a bundle would pass for a whole one
				return err
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("bundle: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", output)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "the bundle file to write (it must not exist)")
	f.StringVar(&opts.SystemNamespace, "system-namespace", "codeport-system",
		"the namespace of the operator and the APIs (the chart's release namespace)")
	f.Int64Var(&opts.TailLines, "tail", 5000, "log lines kept per container")
	return cmd
}
