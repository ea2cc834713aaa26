package holders

// ConfigKeys is parseConfig for the external test that compares it with internal/pve.
func ConfigKeys(text string) [][2]string {
	var out [][2]string
	for _, k := range parseConfig(text) {
		out = append(out, [2]string{k.name, k.value})
	}
	return out
}
