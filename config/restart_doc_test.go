package config

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestRestartKeysAsDocumented: every key docs/configuration.md marks
// "restart" is one a reload keeps at its running value and names in
// restart_needed. scope was documented so but missing from restartOnly:
// a PUT changing it answered applied, restart_needed [] while every
// container went on being labelled with the old scope.
func TestRestartKeysAsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	covered := func(key string) bool {
		for k := key; k != ""; {
			if slices.Contains(restartOnly, k) || k == domainSetting {
				return true
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				break
			}
			k = k[:i]
		}
		return false
	}
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		restart := len(cells) >= 7 && strings.TrimSpace(cells[4]) == "restart" && strings.TrimSpace(cells[2]) != "mapping" ||
			strings.HasSuffix(strings.TrimSpace(cells[len(cells)-2]), "*restart*")
		if !restart {
			continue
		}
		n++
		if !covered(key) {
			t.Errorf("docs/configuration.md: %s is marked restart, but a reload applies it (not in restartOnly)", key)
		}
	}
	if n < 10 {
		t.Fatalf("found %d restart keys in docs/configuration.md, want the tables' (has the format changed?)", n)
	}
}
