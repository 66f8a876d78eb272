package config

import (
	"fmt"
	"os"
)

// LoadPartial is Load for commands that use part of a file: token mint
// needs the keys, not admin_token; healthcheck needs listen.admin. An
// environment variable that is not set expands to the empty string
// instead of failing the file, and is listed in unset, so a command whose
// part came out invalid can say which variable it lacks. The gateway
// itself always uses Load.
func LoadPartial(path string) (c *Config, unset []string, err error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	c, err = parse(path, data, func(name string) (string, bool) {
		v, ok := os.LookupEnv(name)
		if !ok {
			unset = append(unset, name)
		}
		return v, true
	})
	return c, unset, err
}
