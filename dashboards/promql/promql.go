// Package promql finds the metric names a PromQL expression selects, so that dashboards
// (and, later, alert and recording rules) can be checked against the metric contract.
//
// It is a tokenizer, not a parser: it knows just enough of PromQL to tell a metric name
// from a function, an aggregation, a keyword, a label in a grouping clause or a matcher, a
// string, a number, a duration and a Grafana variable ($name, ${name}, $__rate_interval).
// A selector without a name must name its metrics in __name__ ("name" or =~"name1|name2").
package promql

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Selector is one vector selector of an expression: the metric name and the text between
// its braces (empty when it has none).
type Selector struct {
	Metric   string
	Matchers string
}

// keywords are words that are never metric names where they stand.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"inf": true, "nan": true,
}

// groupings are followed by a parenthesised list of label names (optional for group_left
// and group_right).
var groupings = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// aggregations may be written `sum by (label) (expr)`: the name is followed by `by` or
// `without` instead of a parenthesis.
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// Selectors returns the vector selectors of expr, in order of appearance.
func Selectors(expr string) ([]Selector, error) {
	var out []Selector
	s := scanner{src: expr}
	for {
		s.skipSpace()
		if s.eof() {
			return out, nil
		}
		c := s.peek()
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := s.skipString(); err != nil {
				return nil, err
			}
		case c == '$':
			if err := s.skipVariable(); err != nil {
				return nil, err
			}
		case c == '[':
			if _, err := s.block('[', ']'); err != nil {
				return nil, err
			}
		case c == '{':
			m, err := s.block('{', '}')
			if err != nil {
				return nil, err
			}
			names, err := namesOf(m)
			if err != nil {
				return nil, fmt.Errorf("%w at offset %d in %q", err, s.pos, expr)
			}
			for _, n := range names {
				out = append(out, Selector{Metric: n, Matchers: strings.TrimSpace(m)})
			}
		case isDigit(c) || (c == '.' && isDigit(s.at(s.pos+1))):
			s.skipNumber()
		case isIdentStart(c):
			word := s.ident()
			lower := strings.ToLower(word)
			s.skipSpace()
			next := s.peek()
			switch {
			case groupings[lower]:
				if next == '(' {
					if _, err := s.block('(', ')'); err != nil {
						return nil, err
					}
				} else if lower != "group_left" && lower != "group_right" {
					return nil, fmt.Errorf("%q without a label list at offset %d in %q", word, s.pos, expr)
				}
			case keywords[lower]:
			case next == '(':
				// A function call or an aggregation; its arguments are read on.
			case aggregations[lower] && s.nextWordIn("by", "without"):
			default:
				sel := Selector{Metric: word}
				if next == '{' {
					m, err := s.block('{', '}')
					if err != nil {
						return nil, err
					}
					sel.Matchers = strings.TrimSpace(m)
				}
				out = append(out, sel)
			}
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at offset %d in %q", c, s.pos, expr)
		default:
			s.pos++
		}
	}
}

// MetricNames returns the sorted, distinct metric names expr selects.
func MetricNames(expr string) ([]string, error) {
	sels, err := Selectors(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, sel := range sels {
		if !seen[sel.Metric] {
			seen[sel.Metric] = true
			names = append(names, sel.Metric)
		}
	}
	sort.Strings(names)
	return names, nil
}

// nameMatcher is a __name__ matcher: __name__="name" or __name__=~"name1|name2".
var nameMatcher = regexp.MustCompile(`(?:^|,)\s*__name__\s*(=~?)\s*"([^"]*)"\s*(?:,|$)`)

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// namesOf returns the metric names a selector without a name selects through its
// __name__ matcher, which must be an exact name or an alternation of exact names.
func namesOf(matchers string) ([]string, error) {
	m := nameMatcher.FindStringSubmatch(matchers)
	if m == nil {
		return nil, fmt.Errorf("selector without a metric name {%s}", matchers)
	}
	names := []string{m[2]}
	if m[1] == "=~" {
		names = strings.Split(m[2], "|")
	}
	for _, n := range names {
		if !metricName.MatchString(n) {
			return nil, fmt.Errorf("__name__ matcher %q is not a list of metric names", m[2])
		}
	}
	return names, nil
}

type scanner struct {
	src string
	pos int
}

func (s *scanner) eof() bool { return s.pos >= len(s.src) }

func (s *scanner) at(i int) byte {
	if i < len(s.src) {
		return s.src[i]
	}
	return 0
}

func (s *scanner) peek() byte { return s.at(s.pos) }

func (s *scanner) skipSpace() {
	for !s.eof() {
		switch s.peek() {
		case ' ', '\t', '\n', '\r':
			s.pos++
		case '#': // a comment runs to the end of the line
			for !s.eof() && s.peek() != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func (s *scanner) skipString() error {
	quote := s.peek()
	start := s.pos
	s.pos++
	for !s.eof() {
		c := s.peek()
		switch {
		case c == '\\' && quote != '`':
			s.pos += 2
		case c == quote:
			s.pos++
			return nil
		default:
			s.pos++
		}
	}
	return fmt.Errorf("unterminated string at offset %d in %q", start, s.src)
}

// skipVariable skips a Grafana variable: $name, ${name}, ${name:format}, [[name]] is not
// supported (deprecated in Grafana).
func (s *scanner) skipVariable() error {
	s.pos++
	if s.peek() == '{' {
		end := strings.IndexByte(s.src[s.pos:], '}')
		if end < 0 {
			return fmt.Errorf("unterminated variable at offset %d in %q", s.pos, s.src)
		}
		s.pos += end + 1
		return nil
	}
	for !s.eof() && isIdentPart(s.peek()) && s.peek() != ':' {
		s.pos++
	}
	return nil
}

// block returns the text between open and the matching close, skipping strings.
func (s *scanner) block(open, close byte) (string, error) {
	start := s.pos
	depth := 0
	for !s.eof() {
		c := s.peek()
		switch c {
		case '"', '\'', '`':
			if err := s.skipString(); err != nil {
				return "", err
			}
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				s.pos++
				return s.src[start+1 : s.pos-1], nil
			}
		}
		s.pos++
	}
	return "", fmt.Errorf("unbalanced %q at offset %d in %q", open, start, s.src)
}

func (s *scanner) skipNumber() {
	start := s.pos
	for !s.eof() {
		c := s.peek()
		prev := s.at(s.pos - 1)
		switch {
		case c == '.' || (isIdentPart(c) && c != ':'):
			s.pos++
		case (c == '+' || c == '-') && (prev == 'e' || prev == 'E') && !strings.HasPrefix(strings.ToLower(s.src[start:s.pos]), "0x"):
			s.pos++ // exponent sign: 1e-3
		default:
			return
		}
	}
}

func (s *scanner) ident() string {
	start := s.pos
	for !s.eof() && isIdentPart(s.peek()) {
		s.pos++
	}
	return s.src[start:s.pos]
}

// nextWordIn tells whether the next word (after spaces) is one of words, without moving.
func (s *scanner) nextWordIn(words ...string) bool {
	i := s.pos
	for i < len(s.src) && isIdentPart(s.src[i]) {
		i++
	}
	next := strings.ToLower(s.src[s.pos:i])
	for _, w := range words {
		if next == w {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }
