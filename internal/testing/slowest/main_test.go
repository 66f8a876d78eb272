package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestFast"}`,
		`{"Action":"output","Package":"p","Test":"TestFast","Output":"=== RUN   TestFast\n"}`,
		`{"Action":"output","Package":"p","Test":"TestFast","Output":"    quiet when it passes\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestFast","Elapsed":0.5}`,
		`{"Action":"output","Package":"q","Output":"PASS\n"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t1.0s\n"}`,
		`{"Action":"pass","Package":"q","Elapsed":1}`,
		`{"Action":"output","Package":"p","Test":"TestSlow/sub","Output":"    sub says why\n"}`,
		`{"Action":"output","Package":"p","Test":"TestSlow/sub","Output":"--- FAIL: TestSlow/sub (3.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestSlow/sub","Elapsed":3}`,
		`{"Action":"output","Package":"p","Test":"TestSlow","Output":"--- FAIL: TestSlow (4.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestSlow","Elapsed":4}`,
		`{"Action":"output","Package":"p","Test":"TestHung","Output":"    still running\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t5.0s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":5}`,
		`# a line that is not an event`,
	}, "\n")
	var out strings.Builder
	failed, err := summarize(strings.NewReader(in), &out, 10)
	if err != nil || !failed {
		t.Fatalf("got failed %v, err %v; want a failure and no error", failed, err)
	}
	got := out.String()
	for _, want := range []string{"sub says why", "--- FAIL: TestSlow (4.00s)", "still running", "FAIL\tp\t5.0s",
		"# a line that is not an event", "     4.0s  p TestSlow\n     0.5s  p TestFast\n", "     5.0s  p\n", "ok  \tq\t1.0s\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet when it passes", "=== RUN", "PASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q:\n%s", unwanted, got)
		}
	}
}
