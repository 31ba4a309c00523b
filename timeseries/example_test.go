package timeseries_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hourglassdb/hourglass/model"

	"github.com/hourglassdb/hourglass/timeseries"
)

// The usage of the package comment, run: a collection, a measurement per
// sensor, and a find in time order.
func Example() {
	dir, err := os.MkdirTemp("", "hourglass-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := timeseries.Open(timeseries.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	_, err = db.CreateCollection(ctx, "weather", timeseries.CollectionOptions{
		TimeSeries: &model.TimeSeriesOptions{TimeField: "t", MetaField: "sensor"}})
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	_, err = db.Insert(ctx, "weather", timeseries.Batch{Measurements: []model.Measurement{
		{Time: t0 + int64(time.Minute), Meta: "south", Fields: []model.Field{{Name: "temp", Value: model.Float(14.2)}}},
		{Time: t0, Meta: "north", Fields: []model.Field{{Name: "temp", Value: model.Float(20.5)}}},
	}}, timeseries.InsertOptions{})
	if err != nil {
		panic(err)
	}
	cur, err := db.Find(ctx, "weather", timeseries.FindOptions{Order: timeseries.SortAscending})
	if err != nil {
		panic(err)
	}
	defer cur.Close()
	for cur.Next() {
		rec := cur.Record()
		for i := range int(rec.NumRows()) {
			// Columns: the time, the meta value, the _id made for each
			// measurement, temp.
			fmt.Println(rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i), rec.Column(3).ValueStr(i))
		}
	}
	if err := cur.Err(); err != nil {
		panic(err)
	}
	// Output:
	// 2025-03-01 12:00:00Z "north" 20.5
	// 2025-03-01 12:01:00Z "south" 14.2
}
