package bucket

// emptySpec: a column with no present value, of any type. It has no statistics and no
// bytes; its rows read as zero values.
var emptySpec = encodingSpec{
	name: "empty",
	types: 1<<TypeFloat | 1<<TypeInt | 1<<TypeString | 1<<TypeBool | 1<<TypeDate |
		1<<TypeInt32 | 1<<TypeBSON | 1<<TypeObjectID,
}

// readEmpty sets the rows values of dst's type to zero values.
func readEmpty(rows int, dst *Column) {
	switch dst.Type {
	case TypeInt, TypeDate, TypeInt32:
		dst.Ints = grow(dst.Ints, rows)
		clear(dst.Ints)
	case TypeFloat:
		dst.Floats = grow(dst.Floats, rows)
		clear(dst.Floats)
	case TypeObjectID:
		dst.IDs = grow(dst.IDs, rows*ObjectIDLen)
		clear(dst.IDs)
	case TypeString, TypeBSON:
		dst.Strings = grow(dst.Strings, rows)
		clear(dst.Strings)
	case TypeBool:
		dst.Bools = grow(dst.Bools, rows)
		clear(dst.Bools)
	}
}
