package partialfilter

import (
	"regexp"
	"strings"
)

// op is the kind of a node of a parsed filter.
type op uint8

const (
	opAnd op = iota // kids: filter-level nodes, all must match
	opOr            // kids: filter-level nodes, one must match
	opNor           // kids: filter-level nodes, none may match
	opEq
	opGt
	opGte
	opLt
	opLte
	opIn        // list, res: any element equal (or a string matching a regex)
	opExists    // the path yields a present value
	opType      // types: any yielded value has one of the types
	opRegex     // re: any yielded string matches
	opSize      // size: the array at the path has this length
	opAll       // kids: leaf nodes on the same path, all must match; none = no match
	opElemMatch // some element of the array matches: sub (object form) or kids (value form)
	opNot       // kids: leaf nodes on the same path; matches when not all of them match
)

var opNames = [...]string{
	opAnd: "$and", opOr: "$or", opNor: "$nor", opEq: "$eq", opGt: "$gt", opGte: "$gte",
	opLt: "$lt", opLte: "$lte", opIn: "$in", opExists: "$exists", opType: "$type",
	opRegex: "$regex", opSize: "$size", opAll: "$all", opElemMatch: "$elemMatch", opNot: "$not",
}

func (o op) String() string { return opNames[o] }

func (o op) logical() bool { return o <= opNor }

// node is one expression of a parsed filter. Nodes are never modified after
// parsing, so they are shared freely between filters (Conjuncts, And).
type node struct {
	op    op
	path  string   // dotted field path; "" inside a value-form $elemMatch
	parts []string // path split at dots
	// src is the operator as written when it differs from op: "$ne", "$nin"
	// and "$exists" (false) for opNot.
	src   string
	val   any              // operand of opEq..opLte
	list  []any            // operands of opIn
	res   []*regexp.Regexp // compiled regexes of list, nil where list[i] is not a Regex
	re    *regexp.Regexp   // opRegex
	rx    Regex            // opRegex pattern and options as written
	types []typeCode       // opType
	size  int64            // opSize
	kids  []*node
	sub   *node // opElemMatch object form: an opAnd applied to each element document
}

func newLeaf(o op, path string) *node {
	return &node{op: o, path: path, parts: splitPath(path)}
}

func splitPath(path string) []string {
	if path == "" {
		return nil
	}
	return strings.Split(path, ".")
}

// conjuncts appends the top-level AND terms of n to dst, flattening nested
// $and.
func (n *node) conjuncts(dst []*node) []*node {
	if n.op != opAnd {
		return append(dst, n)
	}
	for _, k := range n.kids {
		dst = k.conjuncts(dst)
	}
	return dst
}

// paths adds every field path n refers to.
func (n *node) paths(set map[string]struct{}) {
	if n.op.logical() {
		for _, k := range n.kids {
			k.paths(set)
		}
		return
	}
	set[n.path] = struct{}{}
}
