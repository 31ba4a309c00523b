package command

import (
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/hourglassdb/hourglass/command/pipeline"
	"github.com/hourglassdb/hourglass/document"
	"github.com/hourglassdb/hourglass/model"
	"github.com/hourglassdb/hourglass/mongoerr"
	"github.com/hourglassdb/hourglass/partialfilter"
	"github.com/hourglassdb/hourglass/timeseries"
)

// fieldOrderKey holds, in a document read from a find, its field order (a
// *document.Order: its fields as stored, at every depth), so that the
// fields come back in it and the fields a stage adds after them, as in
// MongoDB (pipeline.OrderKey).
const fieldOrderKey = pipeline.OrderKey

// DocOrder takes the field order out of a document of a PipelineResult:
// the order it was read in, the fields stages added after it (in their
// spec's order). Fields the order does not name come after the others in
// name order (document.Order); a nil order (a document a $group or
// $count made) means _id first, then name order.
func DocOrder(d pipeline.Doc) *document.Order {
	o, _ := d[fieldOrderKey].(*document.Order)
	delete(d, fieldOrderKey)
	return o
}

// RunStages runs stages over docs held in memory: the door's own
// documents (the wire door's $currentOp), with the stages that may follow
// a $group.
func RunStages(docs []pipeline.Doc, stages []Stage) ([]pipeline.Doc, error) {
	return runInMemory(docs, stages)
}

// cursorDocs reads a find's cursor as documents, each with its field
// order: a plain collection's documents as stored, a time series'
// measurements in the order of its columns (the timeField a date, in
// milliseconds as BSON holds it; the metaField and mixed fields their
// values).
type cursorDocs struct {
	cur   *timeseries.Cursor
	rec   arrow.Record
	row   int
	names []string
	json  []bool // by column: JSON text of a value (meta or mixed)
}

func (c *cursorDocs) Next() (pipeline.Doc, error) {
	if c.cur.Documents() {
		if !c.cur.Next() {
			return nil, c.cur.Err()
		}
		if enc := c.cur.Encoded(); enc != nil {
			d, o, err := document.DecodeWithOrder(enc)
			if err != nil {
				return nil, err
			}
			d[fieldOrderKey] = o
			return d, nil
		}
		// A projected document: a copy, which the stages may keep.
		d := pipeline.Doc(deepCopy(c.cur.Doc()).(map[string]any))
		if o := c.cur.Order(); o != nil {
			d[fieldOrderKey] = o
		}
		return d, nil
	}
	for c.rec == nil || c.row >= int(c.rec.NumRows()) {
		if !c.cur.Next() {
			return nil, c.cur.Err()
		}
		c.rec, c.row = c.cur.Record(), 0
		c.names, c.json = c.names[:0], c.json[:0]
		for _, f := range c.rec.Schema().Fields() {
			c.names = append(c.names, document.ValidKey(f.Name))
			c.json = append(c.json, f.Metadata.FindKey(model.MetaColumnMetadataKey) >= 0 || f.Metadata.FindKey(model.MixedColumnMetadataKey) >= 0)
		}
	}
	row := c.row
	c.row++
	return c.measurement(row)
}

// measurement is the document of one row of the current record.
func (c *cursorDocs) measurement(row int) (pipeline.Doc, error) {
	d := make(pipeline.Doc, len(c.names)+1)
	keys := make([]string, 0, len(c.names))
	var subs map[string]*document.Order // of sub-documents and arrays
	for i, col := range c.rec.Columns() {
		if col.IsNull(row) {
			continue
		}
		name := c.names[i]
		switch a := col.(type) {
		case *array.Timestamp:
			d[name] = time.UnixMilli(model.FloorMillis(int64(a.Value(row)))).UTC()
		case *array.Float64:
			d[name] = a.Value(row)
		case *array.Int64:
			d[name] = a.Value(row)
		case *array.Int32:
			d[name] = a.Value(row)
		case *array.FixedSizeBinary: // ObjectIds
			var id partialfilter.ObjectID
			copy(id[:], a.Value(row))
			d[name] = id
		case *array.Binary: // BSON values: the type byte, then the value
			b := a.Value(row)
			if len(b) == 0 {
				continue
			}
			bv := bsoncore.Value{Type: bsoncore.Type(b[0]), Data: b[1:]}
			v, err := model.ValueFromBSON(name, bv, 0)
			if err != nil {
				return nil, err
			}
			d[name] = v
			if so := model.BSONValueOrder(bv); so != nil {
				if subs == nil {
					subs = map[string]*document.Order{}
				}
				subs[name] = so
			}
		case *array.Boolean:
			d[name] = a.Value(row)
		case *array.String:
			if !c.json[i] {
				d[name] = document.ValidUTF8(a.Value(row))
				break
			}
			v, err := model.DecodeMeta(a.Value(row))
			if err != nil {
				return nil, err
			}
			d[name] = v
		default:
			return nil, mongoerr.New(mongoerr.InternalError, "column %q has the unexpected type %s", name, col.DataType())
		}
		keys = append(keys, name)
	}
	d[fieldOrderKey] = &document.Order{Keys: keys, Sub: subs}
	return d, nil
}

// deepCopy copies the maps and slices of a value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
