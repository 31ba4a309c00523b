package partialfilter

import (
	"fmt"

	"github.com/hourglassdb/hourglass/mongoerr"
)

// MaxPartialIndexDepth is the deepest nesting of $and and $or
// ValidateForPartialIndex accepts: a top-level $or whose branches hold $and
// is depth 2. MongoDB bounds it too; 4 leaves room for any filter a person
// writes by hand while keeping index-time checks cheap.
const MaxPartialIndexDepth = 4

// ValidateForPartialIndex checks that the filter only uses what MongoDB
// accepts in a partialFilterExpression: equality (implicit or $eq, not to a
// regex), $gt, $gte, $lt, $lte, $in (without regexes), $exists: true, $type,
// $and and $or, nested at most MaxPartialIndexDepth deep. Anything else
// ($ne, $nin, $not, $regex, $exists: false, $nor, $elemMatch, $size, $all)
// is a *mongoerr.Error with code CannotCreateIndex (67) and the message
// "Expression not supported in partial index: <operator> ..." naming the
// operator and field.
func (f *Filter) ValidateForPartialIndex() error {
	if f.IsEmpty() {
		return nil
	}
	return checkPartial(f.root, 0)
}

func unsupported(what string, n *node) error {
	if n.path != "" {
		what = fmt.Sprintf("%s (field '%s')", what, n.path)
	}
	return mongoerr.New(mongoerr.CannotCreateIndex, "Expression not supported in partial index: %s", what)
}

func checkPartial(n *node, depth int) error {
	switch n.op {
	case opAnd, opOr:
		if depth > MaxPartialIndexDepth {
			return mongoerr.New(mongoerr.CannotCreateIndex,
				"Expression not supported in partial index: $and/$or nested deeper than %d", MaxPartialIndexDepth)
		}
		for _, k := range n.kids {
			if err := checkPartial(k, depth+1); err != nil {
				return err
			}
		}
		return nil
	case opEq, opGt, opGte, opLt, opLte:
		if _, isRe := n.val.(Regex); isRe {
			return unsupported(n.op.String()+" to a regex", n)
		}
		return nil
	case opIn:
		if n.res != nil {
			return unsupported("$in with a regex", n)
		}
		return nil
	case opExists, opType:
		return nil
	case opNot:
		switch n.src {
		case "$exists":
			return unsupported("$exists: false", n)
		case "":
			return unsupported("$not", n)
		}
		return unsupported(n.src, n)
	}
	return unsupported(n.op.String(), n)
}
