package config

import (
	"reflect"
	"slices"
	"strings"
)

// Changed lists the settings that differ between old and new, named as
// written in the file ("limits.max_running", "templates.app.memory",
// "templates.web" for a template added or removed), sorted. Lists
// ("routes", "auth.keys") count as one setting. It names keys only, never
// values, so the result can be logged even where a secret changed. Nil
// when nothing differs or either config is nil.
func Changed(old, new *Config) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	diffValue(reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem(), "", &out)
	slices.Sort(out)
	return out
}

// diffValue appends to out the key of each setting that differs between
// a and b, under path.
func diffValue(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, path)
			}
			return
		}
		diffValue(a.Elem(), b.Elem(), path, out)
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case f.IsExported() && opts == "inline":
				diffValue(a.Field(i), b.Field(i), path, out)
			case f.IsExported() && name != "-" && name != "":
				diffValue(a.Field(i), b.Field(i), join(path, name), out)
			} // else Path, Template.Name, the raw texts: not settings
		}
	case reflect.Slice:
		// An empty list and no list are the same setting: the decoder
		// leaves nil what the file leaves out, a GET shows it as [] (#24, 3:
		// a round trip named four unchanged keys).
		if a.Len() == 0 && b.Len() == 0 {
			return
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	case reflect.Map: // a key on one side only is added or removed
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				diffValue(a.MapIndex(k), bv, join(path, k.String()), out)
			} else {
				*out = append(*out, join(path, k.String()))
			}
		}
		for _, k := range b.MapKeys() {
			if !a.MapIndex(k).IsValid() {
				*out = append(*out, join(path, k.String()))
			}
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}
