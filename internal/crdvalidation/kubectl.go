package crdvalidation

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubectlMessage words err as kubectl prints the API server's refusal of an object
// (k8s.io/kubectl/pkg/cmd/util's checkErr), so a refusal reads the same wherever it is met:
//
//	The Partner "acme" is invalid: spec.contactEmail: Required value
//
// kubectl's account of where the refusal came from ("Error from server (BadRequest): error when
// creating "partner.yaml": ") is left to the caller, which knows the source better. Errors other
// than an API status are worded by their Error method.
func KubectlMessage(err error) string {
	var statusErr *apierrors.StatusError
	if !errors.As(err, &statusErr) {
		return err.Error()
	}
	status := statusErr.Status()
	if status.Reason != metav1.StatusReasonInvalid {
		return status.Message
	}
	details := status.Details
	msg := "The request is invalid"
	if details == nil {
		if status.Message != "" {
			msg += ": " + status.Message
		}
		return msg
	}
	if details.Kind != "" || details.Name != "" {
		msg = fmt.Sprintf("The %s %q is invalid", details.Kind, details.Name)
	} else if status.Message != "" && len(details.Causes) == 0 {
		msg += ": " + status.Message
	}
	var causes []string
	seen := map[string]bool{}
	for _, cause := range details.Causes {
		line := cause.Field + ": " + cause.Message
		if !seen[line] {
			seen[line] = true
			causes = append(causes, line)
		}
	}
	switch len(causes) {
	case 0:
		return msg
	case 1:
		return msg + ": " + causes[0]
	default:
		// kubectl lists several causes one a line, after a prefix that keeps its trailing space.
		return msg + ": \n* " + strings.Join(causes, "\n* ")
	}
}
