package schema_test

import (
	"fmt"
	"os"

	"github.com/dpstream/dpstream/schema"
)

func ExampleDecoder_Decode() {
	d, err := schema.NewDecoder(schema.Config{
		TimeField:  "ts",
		TimeFormat: schema.TimeRFC3339,
		UnitField:  "user_id",
		GroupBy:    []string{"country"},
		Histogram:  &schema.Histogram{Field: "page", Categories: []string{"home", "checkout"}, Other: true},
		ValueField: "amount", Lower: 0, Upper: 100,
	})
	if err != nil {
		panic(err)
	}
	var e schema.Event
	msg := []byte(`{"ts":"2024-05-01T12:00:00.250Z","user_id":42,"country":"DE","page":"search","amount":12.5,"ua":"ignored"}`)
	if err := d.Decode(msg, &e); err != nil {
		panic(err)
	}
	group, _ := schema.GroupValues(e.Group)
	fmt.Println(e.Time, e.Unit, group, e.Bucket, e.Value)

	err = d.Decode([]byte(`{"ts":"2024-05-01T12:00:00Z","user_id":"u1","country":"DE","page":"home","amount":"12"}`), &e)
	fmt.Println(schema.ReasonOf(err), err)
	// Output:
	// 1714564800250 42 [DE] 2 12.5
	// wrong_type schema: invalid event: wrong_type (field "amount")
}

func ExampleReleaseKey() {
	fmt.Println(schema.ReleaseKey("views/1714564800000", "by_country", "DE", "a|b"))
	// Output: views/1714564800000|by_country|DE|a%7Cb
}

func ExampleDecodeRelease() {
	b, err := os.ReadFile("testdata/release_histogram.msgpack")
	if err != nil {
		panic(err)
	}
	r, err := schema.DecodeRelease(b)
	if err != nil {
		panic(err)
	}
	s := r.Series[0]
	fmt.Println(r.Key(), r.Kind, s.Mechanism, s.Scale)
	for i, label := range s.Labels {
		fmt.Printf("%s: %d [%g, %g] at %g\n", label, s.Ints[i], s.Lo[i], s.Hi[i], s.Level)
	}
	fmt.Println(r.Budget, r.Spent, r.Unit)
	// Output:
	// pageviews/1714564800000|pages_by_country|DE|mobile histogram discrete-laplace 2.5
	// home: 1042 [1034.5, 1049.5] at 0.95
	// search: 311 [303.5, 318.5] at 0.95
	// checkout: -2 [-9.5, 5.5] at 0.95
	// other: 57 [49.5, 64.5] at 0.95
	// {0.5 0} {4.5 0} user_id
}
