package main

import (
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// jsonLogsAnnotation marks the commands that run as components (serve, operator): every line
// they write is JSON, their final error included, because log pipelines parse each line.
const jsonLogsAnnotation = "codeport.dev/json-logs"

// routeLogs makes h the process's only way out for log lines, so that a component writes JSON
// and nothing else: slog's default logger (and with it the standard library's log package,
// which net/http and fasthttp write their errors to), klog (client-go's reflectors and leader
// election, which wrote "E1125 …" lines) and controller-runtime's logger. It returns a logger
// on h.
func routeLogs(h slog.Handler) *slog.Logger {
	log := slog.New(h)
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	ctrl.SetLogger(logr.FromSlogHandler(h))
	return log
}

// logsJSON marks cmd as a component whose lines are all JSON.
func logsJSON(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[jsonLogsAnnotation] = "true"
	return cmd
}

// reportError writes the error a command ended with to out: a JSON line for a component, plain
// text for the other commands, which people read.
func reportError(out io.Writer, cmd *cobra.Command, err error) {
	if cmd != nil && cmd.Annotations[jsonLogsAnnotation] == "true" {
		slog.New(slog.NewJSONHandler(out, nil)).Error("codeport: " + err.Error())
		return
	}
	_, _ = io.WriteString(out, "codeport: "+err.Error()+"\n")
}
