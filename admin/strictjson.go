package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// strictKeys refuses what encoding/json would accept in body, one JSON
// object meant for v (a pointer to a struct of the adminapi request
// types), without a word: a key spelled in another case than its field's
// ({"Public": true} sets public: encoding/json matches names without
// case), and a key given twice at any depth ({"public": false, "public":
// true}: the last one wins, and what a reviewer of the body reads first is
// not what is done). The error names the key. A body that is not valid
// JSON passes: the decode that follows says what is wrong with it.
func strictKeys(body []byte, v any) error {
	names := fieldNames(v)
	type frame struct {
		obj, wantKey bool
		seen         map[string]bool
		path         string
	}
	var stack []frame
	var key string // the last key read, for the path of a nested value
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, isString := tok.(string)
		if n := len(stack); isString && n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			top := &stack[n-1]
			if top.seen[k] {
				return fmt.Errorf("key %q is given twice", top.path+k)
			}
			top.seen[k] = true
			if n == 1 && names != nil && !names[k] {
				for name := range names {
					if strings.EqualFold(name, k) {
						return fmt.Errorf("unknown key %q (keys are exact: %q)", k, name)
					}
				}
				return fmt.Errorf("unknown key %q", k)
			}
			top.wantKey, key = false, k
			continue
		}
		path := ""
		if n := len(stack); n > 0 {
			path = stack[n-1].path
			if stack[n-1].obj {
				path += key + "."
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true, seen: map[string]bool{}, path: path})
			continue
		case json.Delim('['):
			stack = append(stack, frame{path: path})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil // the one value; decodeJSON refuses anything after it
			}
		}
		if top := &stack[len(stack)-1]; top.obj {
			top.wantKey = true
		}
	}
}

// fieldNames is the set of JSON names of the fields of the struct v
// points to, or nil if v is not a pointer to a struct.
func fieldNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}
