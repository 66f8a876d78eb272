package e2e

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
)

// TestDocsListEveryKey: docs/configuration.md has a table row for every key
// the file format accepts (#24, 4: allow_env and api_tokens had none). Keys
// of list items and map values (templates.<name>, routes[], auth.keys[],
// api_tokens[]) are written relative to the item, as the docs' tables do;
// a rate (per_ip: {rate, burst}) is one value.
func TestDocsListEveryKey(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `") {
			rows = append(rows, l)
		}
	}
	documented := func(key string) bool {
		for _, r := range rows {
			if strings.HasPrefix(r, "| `"+key+"`") {
				return true
			}
		}
		return false
	}
	for _, key := range configKeys(reflect.TypeFor[config.Config](), "") {
		if !documented(key) {
			t.Errorf("docs/configuration.md has no row for %q", key)
		}
	}
}

// configKeys lists the yaml keys of struct type t under prefix.
func configKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if strings.Contains(f.Tag.Get("yaml"), "inline") {
			keys = append(keys, configKeys(ft, prefix)...)
			continue
		}
		key := prefix + tag
		switch {
		case ft == reflect.TypeFor[config.Rate](), ft == reflect.TypeFor[config.RateLimits]():
			keys = append(keys, key)
		case ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() && ft.NumField() > 0 && !isValueType(ft):
			keys = append(keys, configKeys(ft, key+".")...)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && ft.Elem().Kind() == reflect.Pointer && ft.Elem().Elem().Kind() == reflect.Struct:
			keys = append(keys, key)
			keys = append(keys, configKeys(ft.Elem().Elem(), "")...)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map) && ft.Elem().Kind() == reflect.Struct && ft.Elem().PkgPath() == t.PkgPath():
			keys = append(keys, key)
			keys = append(keys, configKeys(ft.Elem(), "")...)
		default:
			keys = append(keys, key)
		}
	}
	return keys
}

// isValueType: a config type written as one scalar (a URL, a duration).
func isValueType(t reflect.Type) bool {
	_, ok := reflect.New(t).Interface().(interface{ String() string })
	return ok
}
