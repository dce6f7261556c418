package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"sort"
	"strings"
)

//go:embed v2.json
var v2 []byte

//go:embed v1.json
var v1 []byte

// V2 returns the document of the current API.
func V2() []byte { return append([]byte(nil), v2...) }

// V1 returns the document of the legacy catalog API.
func V1() []byte { return append([]byte(nil), v1...) }

// doc is the subset of a document the HTML page shows.
type doc struct {
	Info struct {
		Title, Version, Description string
	}
	Paths      map[string]map[string]operation
	Components struct {
		Schemas map[string]json.RawMessage
	}
}

type operation struct {
	OperationID string `json:"operationId"`
	Summary     string
	Description string
	Parameters  []struct {
		Name, In, Description string
		Required              bool
		Schema                json.RawMessage
	}
	RequestBody *struct {
		Content map[string]struct {
			Schema  json.RawMessage
			Example json.RawMessage
		}
	} `json:"requestBody"`
	Responses map[string]struct {
		Description string
		Content     map[string]struct {
			Schema  json.RawMessage
			Example json.RawMessage
		}
	}
}

type pageOp struct {
	Method, Path, Anchor, Summary, Description string
	Params                                     []pageParam
	RequestSchema, RequestExample              string
	Responses                                  []pageResponse
}

type pageParam struct{ Name, In, Type, Description string }

type pageResponse struct{ Status, Description, Schema, Example string }

type pageAPI struct {
	Title, Version, Description, Base string
	Ops                               []pageOp
	Schemas                           []pageSchema
	Errors                            []pageResponse
}

type pageSchema struct{ Name, JSON string }

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func build(raw []byte, base string) (pageAPI, error) {
	var d doc
	if err := json.Unmarshal(raw, &d); err != nil {
		return pageAPI{}, fmt.Errorf("parse OpenAPI document: %w", err)
	}
	api := pageAPI{Title: d.Info.Title, Version: d.Info.Version, Description: d.Info.Description, Base: base}
	seenErrors := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(d.Paths)) {
		for method, op := range d.Paths[p] {
			po := buildOp(strings.ToUpper(method), base+p, op)
			api.Ops = append(api.Ops, po)
			// The first operation to show an error body makes it an example of the Errors section.
			for _, pr := range po.Responses {
				if pr.Status >= "400" && pr.Example != "" && !seenErrors[pr.Example] {
					seenErrors[pr.Example] = true
					api.Errors = append(api.Errors, pageResponse{Status: pr.Status, Description: pr.Description, Example: pr.Example})
				}
			}
		}
	}
	sort.SliceStable(api.Ops, func(i, j int) bool { return api.Ops[i].Path < api.Ops[j].Path })
	for _, n := range slices.Sorted(maps.Keys(d.Components.Schemas)) {
		api.Schemas = append(api.Schemas, pageSchema{Name: n, JSON: pretty(d.Components.Schemas[n])})
	}
	return api, nil
}

// buildOp is one operation as the page shows it, responses in order of status.
func buildOp(method, path string, op operation) pageOp {
	po := pageOp{Method: method, Path: path, Anchor: op.OperationID, Summary: op.Summary, Description: op.Description}
	for _, prm := range op.Parameters {
		var s struct{ Type any }
		_ = json.Unmarshal(prm.Schema, &s)
		req := ""
		if prm.Required {
			req = " (required)"
		}
		po.Params = append(po.Params, pageParam{
			Name:        prm.Name,
			In:          prm.In + req,
			Type:        fmt.Sprint(s.Type),
			Description: prm.Description,
		})
	}
	if op.RequestBody != nil {
		if c, ok := op.RequestBody.Content["application/json"]; ok {
			po.RequestSchema, po.RequestExample = pretty(c.Schema), pretty(c.Example)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(op.Responses)) {
		r := op.Responses[code]
		pr := pageResponse{Status: code, Description: r.Description}
		if c, ok := r.Content["application/json"]; ok {
			pr.Schema, pr.Example = pretty(c.Schema), pretty(c.Example)
		}
		po.Responses = append(po.Responses, pr)
	}
	return po
}

// pageHTML is the template of the reference page.
//
//go:embed page.html
var pageHTML string

var page = template.Must(template.New("docs").Parse(strings.TrimSuffix(pageHTML, "\n")))

// HTML renders both documents as one self-contained page (no scripts, no external assets).
func HTML() ([]byte, error) {
	var apis []pageAPI
	for _, d := range []struct {
		raw  []byte
		base string
	}{{v2, "/v2"}, {v1, "/v1"}} {
		api, err := build(d.raw, d.base)
		if err != nil {
			return nil, err
		}
		apis = append(apis, api)
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, apis); err != nil {
		return nil, fmt.Errorf("render API reference: %w", err)
	}
	return buf.Bytes(), nil
}
