package bench

import (
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// refPrompt is a prompt with a hand-written reply of the kind a large
// model would give (`k3 bench spec --reference`): no model is asked; the
// drafter and controller run over the reply as if a model had chosen it.
// It measures the drafter on text the demo model cannot write (code, a
// summary), and is labelled as such wherever it is printed.
type refPrompt struct {
	name  string
	msgs  []xtml.Message
	reply string
}

const specChatAnswer = `A sluggish starter usually needs warmth, a steady feeding schedule and the right flour. ` +
	`Keep it somewhere around 24 to 27 degrees Celsius; a cold kitchen is the most common reason a starter rises slowly. ` +
	`Feed it at the same time every day, discarding all but a tablespoon or two and refreshing it with equal weights of flour and water. ` +
	`Whole wheat or rye flour gives the yeast and bacteria more to eat than white flour, so mixing in 20 to 30 percent of it often wakes a starter up within a few days. ` +
	`Use filtered or boiled and cooled water if your tap water is heavily chlorinated. ` +
	`Once it reliably doubles within four to six hours after a feeding, it is active enough to bake with.`

var refPrompts = []refPrompt{
	{"chat", []xtml.Message{{Role: "user", Content: "My sourdough starter is a week old and barely rises. How do I make it more active?"}},
		specChatAnswer},
	{"code", []xtml.Message{{Role: "user", Content: "Write a Go function SumCSV that parses a comma-separated list of integers (spaces allowed) and returns their sum, with a table-driven test."}},
		"```go\npackage csvsum\n\nimport (\n\t\"fmt\"\n\t\"strconv\"\n\t\"strings\"\n)\n\n" +
			"// SumCSV parses a comma-separated list of integers and returns their sum.\n" +
			"func SumCSV(s string) (int, error) {\n\tif strings.TrimSpace(s) == \"\" {\n\t\treturn 0, nil\n\t}\n\tsum := 0\n" +
			"\tfor i, field := range strings.Split(s, \",\") {\n\t\tn, err := strconv.Atoi(strings.TrimSpace(field))\n\t\tif err != nil {\n" +
			"\t\t\treturn 0, fmt.Errorf(\"field %d: %w\", i+1, err)\n\t\t}\n\t\tsum += n\n\t}\n\treturn sum, nil\n}\n```\n\n" +
			"```go\npackage csvsum\n\nimport \"testing\"\n\nfunc TestSumCSV(t *testing.T) {\n\ttests := []struct {\n\t\tname    string\n\t\tinput   string\n\t\twant    int\n\t\twantErr bool\n\t}{\n" +
			"\t\t{name: \"empty\", input: \"\", want: 0},\n\t\t{name: \"single\", input: \"7\", want: 7},\n\t\t{name: \"several\", input: \"1,2,3\", want: 6},\n" +
			"\t\t{name: \"spaces\", input: \" 1, 2 ,3 \", want: 6},\n\t\t{name: \"negative\", input: \"-4,10\", want: 6},\n" +
			"\t\t{name: \"not a number\", input: \"1,x,3\", wantErr: true},\n\t\t{name: \"empty field\", input: \"1,,3\", wantErr: true},\n\t}\n" +
			"\tfor _, tt := range tests {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tgot, err := SumCSV(tt.input)\n\t\t\tif (err != nil) != tt.wantErr {\n" +
			"\t\t\t\tt.Fatalf(\"SumCSV(%q) error = %v, wantErr %v\", tt.input, err, tt.wantErr)\n\t\t\t}\n\t\t\tif got != tt.want {\n" +
			"\t\t\t\tt.Errorf(\"SumCSV(%q) = %d, want %d\", tt.input, got, tt.want)\n\t\t\t}\n\t\t})\n\t}\n}\n```\n\n" +
			"SumCSV trims each field before parsing it, so spaces around the numbers are allowed, and it reports the position of the first field that is not an integer. An empty input sums to 0."},
	{"summarise", []xtml.Message{{Role: "user", Content: "Summarise this text in a few sentences.\n\n" +
		"The town council met on Tuesday to discuss the future of the old river bridge, which has been closed to cars since a structural survey in March found corrosion in two of its steel supports. " +
		"Engineers presented three options. The first is a full repair of the existing bridge, which would cost an estimated 4.2 million euros and take about eighteen months, during which the bridge would stay closed to all traffic. " +
		"The second is to replace the bridge with a new concrete structure at a cost of 6.8 million euros; construction would take two years, but a temporary footbridge could be installed so that pedestrians and cyclists can still cross the river. " +
		"The third option is to close the bridge permanently to motor vehicles and convert it into a pedestrian and cycle bridge, which would require only 1.5 million euros of repairs and could be finished within nine months. " +
		"Shop owners on the east bank argued that the closure has already cut their trade by a third and asked the council to reopen the bridge to cars as soon as possible. " +
		"Residents of the narrow streets on the west bank, however, said that traffic has been calmer since March and supported the third option. " +
		"The council will hold a public consultation in June and expects to vote on the options in September."}},
		"The town council is deciding what to do with the old river bridge, which has been closed to cars since a survey in March found corrosion in two of its steel supports. " +
			"Engineers presented three options: a full repair of the existing bridge for about 4.2 million euros and eighteen months of closure, " +
			"a new concrete bridge for 6.8 million euros built over two years with a temporary footbridge for pedestrians and cyclists, " +
			"or closing the bridge permanently to motor vehicles and converting it into a pedestrian and cycle bridge for 1.5 million euros within nine months. " +
			"Shop owners on the east bank want the bridge reopened to cars as soon as possible because the closure has cut their trade by a third, while residents on the west bank support the third option because traffic has been calmer since March. " +
			"The council will hold a public consultation in June and vote on the options in September."},
	{"second turn", []xtml.Message{
		{Role: "user", Content: "My sourdough starter is a week old and barely rises. How do I make it more active?"},
		{Role: "assistant", Content: specChatAnswer},
		{Role: "user", Content: "Thanks! Can you turn that into a short numbered checklist I can stick on the fridge?"}},
		"1. Keep the starter warm, around 24 to 27 degrees Celsius.\n" +
			"2. Feed it at the same time every day.\n" +
			"3. At each feeding, discard all but a tablespoon or two and refresh it with equal weights of flour and water.\n" +
			"4. Mix in 20 to 30 percent whole wheat or rye flour to give the yeast and bacteria more to eat.\n" +
			"5. Use filtered or boiled and cooled water if your tap water is heavily chlorinated.\n" +
			"6. Bake with it once it reliably doubles within four to six hours after a feeding."},
}

// refTokens renders a prompt as the chat transcript and cuts it and the
// reply into the K3 pre-tokenizer's pieces, one id per distinct piece (a
// stand-in for the released 163840-token vocabulary, where nearly every
// such piece of English and code is one token). It returns the ids and
// where the reply starts.
func refTokens(p refPrompt, vocab map[string]int) ([]int, int, error) {
	segs, err := xtml.Render(p.msgs, nil, xtml.RenderOptions{NoThink: true})
	if err != nil {
		return nil, 0, err
	}
	id := func(text string) []int {
		var out []int
		for _, piece := range tokenizer.Pretokenize(text) {
			if _, ok := vocab[piece]; !ok {
				vocab[piece] = len(vocab)
			}
			out = append(out, vocab[piece])
		}
		return out
	}
	var ids []int
	for _, s := range segs {
		if s.Special { // a special token is one token
			if _, ok := vocab[s.Text]; !ok {
				vocab[s.Text] = len(vocab)
			}
			ids = append(ids, vocab[s.Text])
			continue
		}
		ids = append(ids, id(s.Text)...)
	}
	start := len(ids)
	return append(ids, id(p.reply)...), start, nil
}
