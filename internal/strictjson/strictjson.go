package strictjson

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Problem is what Check found.
type Problem int

const (
	// Syntax means the document is not one well-formed JSON value (or nests deeper than MaxDepth).
	Syntax Problem = iota + 1
	// DuplicateKey means an object has Key twice.
	DuplicateKey
	// InvalidText means a string at Location is not valid UTF-8, holds NUL, or escapes a lone
	// surrogate.
	InvalidText
	// Refused means the visitor refused Key; Err says why.
	Refused
)

// MaxDepth is the deepest nesting of arrays and objects Check reads: far beyond any request of
// the API, shallow enough that a hostile body cannot exhaust the stack.
const MaxDepth = 64

// Error is the first problem Check found.
type Error struct {
	Problem Problem
	// Location names where, as a partner reads it: orderProducts[1].quantity. Empty for the
	// document itself.
	Location string
	// Key is the duplicated or refused key.
	Key string
	// InKey says the invalid text is a key of the object at Location, not its value.
	InKey bool
	// Err is the visitor's error, for Refused.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	switch e.Problem {
	case DuplicateKey:
		return "duplicate key " + strconv.Quote(e.Key) + at(e.Location)
	case InvalidText:
		return "text that is not valid UTF-8 or holds NUL" + at(e.Location)
	case Refused:
		return "key " + strconv.Quote(e.Key) + at(e.Location) + ": " + e.Err.Error()
	}
	return "malformed JSON" + at(e.Location)
}

// Unwrap returns the error underneath, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

func at(location string) string {
	if location == "" {
		return ""
	}
	return " at " + location
}

// Visitor sees every object key with the keys of the objects around it, outermost first (array
// elements are transparent: a line's key has parents ["orderProducts"]), and whether its value is
// the literal null. An error refuses it.
type Visitor func(parents []string, key string, null bool) error

// Check reads data and returns the first *Error in document order, or nil. visit may be nil.
func Check(data []byte, visit Visitor) error {
	c := checker{data: data, visit: visit}
	if err := c.value(0); err != nil {
		return err
	}
	c.space()
	if c.pos != len(c.data) {
		return c.fail(Syntax)
	}
	return nil
}

type checker struct {
	data  []byte
	pos   int
	visit Visitor
	// parents are the keys of the enclosing objects; path is the location as a partner reads it,
	// one element per enclosing key or array index.
	parents []string
	path    []string
}

func (c *checker) fail(p Problem) *Error {
	return &Error{Problem: p, Location: strings.Join(c.path, "")}
}

func (c *checker) space() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *checker) value(depth int) error {
	c.space()
	if c.pos >= len(c.data) {
		return c.fail(Syntax)
	}
	switch b := c.data[c.pos]; {
	case b == '{' || b == '[':
		if depth >= MaxDepth {
			return c.fail(Syntax)
		}
		if b == '{' {
			return c.object(depth + 1)
		}
		return c.array(depth + 1)
	case b == '"':
		if _, err := c.str(false); err != nil {
			return err
		}
		return nil
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	default:
		for _, lit := range literals {
			if bytes.HasPrefix(c.data[c.pos:], lit) {
				c.pos += len(lit)
				return nil
			}
		}
		return c.fail(Syntax)
	}
}

// largeObject is the number of keys above which an object's keys are remembered in a map: a
// linear scan is cheaper for the few keys of real requests, but quadratic in a hostile one.
const largeObject = 16

func (c *checker) object(depth int) error {
	c.pos++ // {
	c.space()
	if c.pos < len(c.data) && c.data[c.pos] == '}' {
		c.pos++
		return nil
	}
	var keys objectKeys
	for {
		c.space()
		if c.pos >= len(c.data) || c.data[c.pos] != '"' {
			return c.fail(Syntax)
		}
		key, err := c.str(true)
		if err != nil {
			err.InKey = err.Problem == InvalidText
			return err
		}
		if keys.duplicate(key) {
			e := c.fail(DuplicateKey)
			e.Key = key
			return e
		}
		if c.visit != nil {
			if err := c.visit(c.parents, key, c.nullValue()); err != nil {
				return &Error{Problem: Refused, Location: strings.Join(c.path, ""), Key: key, Err: err}
			}
		}
		c.space()
		if c.pos >= len(c.data) || c.data[c.pos] != ':' {
			return c.fail(Syntax)
		}
		c.pos++
		c.enter(&key, dotted(len(c.path) > 0, key))
		if err := c.value(depth); err != nil {
			return err
		}
		c.leave(true)
		end, err := c.separator('}')
		if err != nil {
			return err
		}
		if end {
			return nil
		}
	}
}

// nullValue reports whether the member whose key was just read has the value null, without
// reading on.
func (c *checker) nullValue() bool {
	start := c.pos
	defer func() { c.pos = start }()
	c.space()
	if !c.peek(':') {
		return false
	}
	c.pos++
	c.space()
	if !bytes.HasPrefix(c.data[c.pos:], null) {
		return false
	}
	c.pos += len(null)
	c.space()
	return c.pos == len(c.data) || c.peek(',') || c.peek('}')
}

// separator reads what follows a member or element: a comma, or closer, which ends the object
// or array (end).
func (c *checker) separator(closer byte) (end bool, err *Error) {
	c.space()
	switch {
	case c.peek(','):
		c.pos++
		return false, nil
	case c.peek(closer):
		c.pos++
		return true, nil
	}
	return false, c.fail(Syntax)
}

func dotted(nested bool, key string) string {
	if nested {
		return "." + key
	}
	return key
}

// enter steps into the value of key (an object member) or, with key nil, of an array element.
func (c *checker) enter(key *string, element string) {
	if key != nil {
		c.parents = append(c.parents, *key)
	}
	c.path = append(c.path, element)
}

func (c *checker) leave(key bool) {
	if key {
		c.parents = c.parents[:len(c.parents)-1]
	}
	c.path = c.path[:len(c.path)-1]
}

// objectKeys are the keys of one object seen so far: in a slice while they are few, in a map
// once there are more than largeObject.
type objectKeys struct {
	few  []string
	many map[string]struct{}
}

// duplicate records key among the object's keys and reports whether it was there already.
func (o *objectKeys) duplicate(key string) bool {
	if o.many != nil {
		if _, ok := o.many[key]; ok {
			return true
		}
		o.many[key] = struct{}{}
		return false
	}
	for _, k := range o.few {
		if k == key {
			return true
		}
	}
	o.few = append(o.few, key)
	if len(o.few) > largeObject {
		o.many = make(map[string]struct{}, 2*len(o.few))
		for _, k := range o.few {
			o.many[k] = struct{}{}
		}
		o.few = nil
	}
	return false
}

func (c *checker) array(depth int) error {
	c.pos++ // [
	c.space()
	if c.pos < len(c.data) && c.data[c.pos] == ']' {
		c.pos++
		return nil
	}
	for i := 0; ; i++ {
		c.enter(nil, "["+strconv.Itoa(i)+"]")
		if err := c.value(depth); err != nil {
			return err
		}
		c.leave(false)
		end, err := c.separator(']')
		if err != nil {
			return err
		}
		if end {
			return nil
		}
	}
}

var null = []byte("null")

var literals = [][]byte{[]byte("true"), []byte("false"), null}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *checker) number() error {
	if c.peek('-') {
		c.pos++
	}
	switch {
	case c.peek('0'):
		c.pos++
	case c.pos < len(c.data) && c.data[c.pos] >= '1' && c.data[c.pos] <= '9':
		c.digits()
	default:
		return c.fail(Syntax)
	}
	if c.peek('.') {
		c.pos++
		if c.digits() == 0 {
			return c.fail(Syntax)
		}
	}
	if c.peek('e') || c.peek('E') {
		c.pos++
		if c.peek('+') || c.peek('-') {
			c.pos++
		}
		if c.digits() == 0 {
			return c.fail(Syntax)
		}
	}
	return nil
}

func (c *checker) peek(b byte) bool { return c.pos < len(c.data) && c.data[c.pos] == b }

// digits steps over digits and says how many.
func (c *checker) digits() int {
	start := c.pos
	for c.pos < len(c.data) && c.data[c.pos] >= '0' && c.data[c.pos] <= '9' {
		c.pos++
	}
	return c.pos - start
}

// str reads the string at pos (its opening quote) and checks its text. It returns the string's
// value when wanted (keys), else "".
func (c *checker) str(want bool) (string, *Error) {
	c.pos++ // "
	start := c.pos
	var buf []byte // the value, once an escape means it differs from the raw bytes
	for c.pos < len(c.data) {
		b := c.data[c.pos]
		switch {
		case b == '"':
			raw := c.data[start:c.pos]
			c.pos++
			if !want {
				return "", nil
			}
			if buf != nil {
				return string(buf), nil
			}
			return string(raw), nil
		case b < 0x20:
			return "", c.fail(Syntax)
		case b == '\\':
			if want && buf == nil {
				buf = append([]byte(nil), c.data[start:c.pos]...)
			}
			r, err := c.escape()
			if err != nil {
				return "", err
			}
			if want {
				buf = utf8.AppendRune(buf, r)
			}
		case b < utf8.RuneSelf:
			c.pos++
			if buf != nil {
				buf = append(buf, b)
			}
		default:
			r, size := utf8.DecodeRune(c.data[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", c.fail(InvalidText)
			}
			if buf != nil {
				buf = append(buf, c.data[c.pos:c.pos+size]...)
			}
			c.pos += size
		}
	}
	return "", c.fail(Syntax)
}

// escape reads the escape at pos (its backslash) and returns the character it stands for.
func (c *checker) escape() (rune, *Error) {
	if c.pos+1 >= len(c.data) {
		return 0, c.fail(Syntax)
	}
	c.pos += 2
	switch c.data[c.pos-1] {
	case '"', '\\', '/':
		return rune(c.data[c.pos-1]), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := c.hex4()
		if err != nil {
			return 0, err
		}
		switch {
		case r == 0:
			return 0, c.fail(InvalidText)
		case utf16.IsSurrogate(r):
			// Only a high surrogate followed by an escaped low one is a character.
			if r >= 0xDC00 || c.pos+1 >= len(c.data) || c.data[c.pos] != '\\' || c.data[c.pos+1] != 'u' {
				return 0, c.fail(InvalidText)
			}
			c.pos += 2
			low, err := c.hex4()
			if err != nil {
				return 0, err
			}
			if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
				return pair, nil
			}
			return 0, c.fail(InvalidText)
		}
		return r, nil
	}
	return 0, c.fail(Syntax)
}

func (c *checker) hex4() (rune, *Error) {
	if c.pos+4 > len(c.data) {
		return 0, c.fail(Syntax)
	}
	var r rune
	for _, b := range c.data[c.pos : c.pos+4] {
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, c.fail(Syntax)
		}
	}
	c.pos += 4
	return r, nil
}
