package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// EnvironmentsKey marks a part of a kept document that only some environments serve: a path, a
// response or a component parameter with "x-codeport-environments": ["sandbox"] is left out of
// every other environment's document, with every reference to it. The documents are kept once
// and served per environment, so that each says exactly what its server does.
const EnvironmentsKey = "x-codeport-environments"

// ForEnvironment returns the document env serves: doc without the parts marked for other
// environments and without the marks. Every other byte stays as it was kept (the order of keys,
// the indentation), so the sandbox's document differs from the kept one only by its marks.
func ForEnvironment(doc []byte, env string) ([]byte, error) {
	root, err := parseOrdered(doc)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document: %w", err)
	}
	if root.kind != '{' {
		return nil, errors.New("OpenAPI document: not a JSON object")
	}
	removed := map[string]bool{}
	if components := root.get("components"); components != nil {
		for _, section := range components.vals {
			if section.kind != '{' {
				continue
			}
			for i, name := range slices.Clone(section.keys) {
				if !servedIn(section.vals[i], env) {
					removed["#/components/"+components.keyOf(section)+"/"+name] = true
				}
			}
		}
	}
	root.prune(env, removed)
	var out bytes.Buffer
	root.write(&out, 0)
	if bytes.HasSuffix(doc, []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// servedIn says whether a marked object is part of env's document.
func servedIn(n *node, env string) bool {
	if n.kind != '{' {
		return true
	}
	mark := n.get(EnvironmentsKey)
	if mark == nil {
		return true
	}
	for _, item := range mark.items {
		var name string
		if json.Unmarshal(item.raw, &name) == nil && name == env {
			return true
		}
	}
	return false
}

// node is a JSON value that keeps the order of its object's keys and its scalars' text.
type node struct {
	kind  byte // '{', '[', or 0 for a scalar in raw
	keys  []string
	vals  []*node
	items []*node
	raw   json.RawMessage
}

func (n *node) get(key string) *node {
	if i := slices.Index(n.keys, key); i >= 0 {
		return n.vals[i]
	}
	return nil
}

func (n *node) keyOf(child *node) string {
	if i := slices.Index(n.vals, child); i >= 0 {
		return n.keys[i]
	}
	return ""
}

// prune drops what env does not serve, references to removed components and the marks.
func (n *node) prune(env string, removed map[string]bool) {
	switch n.kind {
	case '{':
		keys, vals := n.keys[:0:0], n.vals[:0:0]
		for i, key := range n.keys {
			child := n.vals[i]
			if key == EnvironmentsKey || !servedIn(child, env) || removed[child.ref()] {
				continue
			}
			child.prune(env, removed)
			keys, vals = append(keys, key), append(vals, child)
		}
		n.keys, n.vals = keys, vals
	case '[':
		items := n.items[:0:0]
		for _, item := range n.items {
			if !servedIn(item, env) || removed[item.ref()] {
				continue
			}
			item.prune(env, removed)
			items = append(items, item)
		}
		n.items = items
	}
}

// ref is the target of a reference object, or "".
func (n *node) ref() string {
	if n.kind != '{' || len(n.keys) != 1 || n.keys[0] != "$ref" {
		return ""
	}
	var target string
	_ = json.Unmarshal(n.vals[0].raw, &target)
	return target
}

func parseOrdered(doc []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	n, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return n, nil
}

func parseValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n := &node{kind: '{'}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, err
			}
			val, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			n.keys, n.vals = append(n.keys, key.(string)), append(n.vals, val)
		}
		_, err := dec.Token()
		return n, err
	case json.Delim('['):
		n := &node{kind: '['}
		for dec.More() {
			item, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
		_, err := dec.Token()
		return n, err
	}
	raw, err := scalar(tok)
	return &node{raw: raw}, err
}

func scalar(tok json.Token) (json.RawMessage, error) {
	if num, ok := tok.(json.Number); ok {
		return json.RawMessage(num), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tok); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// write prints n as the documents are kept: two spaces of indentation, ": " after keys.
func (n *node) write(out *bytes.Buffer, depth int) {
	switch n.kind {
	case '{':
		writeSequence(out, depth, "{}", len(n.keys), func(i int) {
			key, _ := scalar(n.keys[i])
			out.Write(key)
			out.WriteString(": ")
			n.vals[i].write(out, depth+1)
		})
	case '[':
		writeSequence(out, depth, "[]", len(n.items), func(i int) { n.items[i].write(out, depth+1) })
	default:
		out.Write(n.raw)
	}
}

// writeSequence prints the n members of an object or array between its brackets, one a line.
func writeSequence(out *bytes.Buffer, depth int, brackets string, n int, member func(int)) {
	out.WriteByte(brackets[0])
	if n == 0 {
		out.WriteByte(brackets[1])
		return
	}
	for i := range n {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString("\n" + strings.Repeat("  ", depth+1))
		member(i)
	}
	out.WriteString("\n" + strings.Repeat("  ", depth))
	out.WriteByte(brackets[1])
}
