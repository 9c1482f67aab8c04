package cli

import "k3/tokenizer"

func init() {
	loadTokenizer = func(dir string) (textCodec, error) {
		t, err := tokenizer.Load(dir)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}
