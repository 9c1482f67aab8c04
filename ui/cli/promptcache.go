package cli

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"k3/engine"
	"k3/engine/promptcache"
	"k3/storage/units"
)

func init() {
	register("cache", "the prompt cache: list, size or clear the saved prompt states (k3 cache list|size|clear)", cmdCache)
}

// cacheFlags are the prompt cache's flags (k3 run, chat, serve).
type cacheFlags struct {
	dir *string
	gb  *float64
}

func addCacheFlags(fs *flag.FlagSet) *cacheFlags {
	return &cacheFlags{
		dir: fs.String("prompt-cache", "", "prompt cache folder, or off (default $"+promptcache.Env+", else the user cache folder's k3/prompts): a prompt that starts like one read before is read only from where they differ"),
		gb:  fs.Float64("prompt-cache-gb", 0, "disk budget of the prompt cache in GB (default: a tenth of the free space, at most 64)"),
	}
}

// open opens the prompt cache of model m (nil when off). Its memory share
// is what the plan reserved for the run's state copies (o.StateCopies of
// the planned state: none at the smallest presets, where snapshots are
// read from disk when used); what does not fit stays on disk. Skipped
// files are reported on stderr.
func (f *cacheFlags) open(cmd string, m *engine.Model, o engine.Options, stdout, stderr io.Writer) (*promptcache.Cache, error) {
	if *f.gb < 0 || *f.gb > maxBudgetGB {
		return nil, fmt.Errorf("--prompt-cache-gb must be from 0 to %g", float64(maxBudgetGB))
	}
	dir, err := promptcache.ResolveDir(*f.dir)
	if err != nil || dir == "" {
		return nil, err
	}
	disk := int64(*f.gb * 1e9)
	if disk == 0 {
		disk = promptcache.DefaultDiskBytes(dir)
	}
	var ram int64
	if m.Plan != nil {
		ram = int64(o.StateCopies) * (m.Plan.State + m.Plan.KV)
	}
	c, err := promptcache.Open(m, promptcache.Options{Dir: dir, RAMBytes: ram, DiskBytes: disk,
		Warn: func(s string) { fmt.Fprintf(stderr, "k3 %s: %s\n", cmd, s) }})
	if err != nil && *f.dir == "" {
		// the default folder: the run goes on without the cache
		fmt.Fprintf(stderr, "k3 %s: the prompt cache is off: %v\n", cmd, err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := c.Stats()
	fmt.Fprintf(stdout, "prompt cache: %s (%d saved, %s of %s on disk, %s in memory)\n", dir, st.Entries, units.Bytes(st.DiskBytes), units.Bytes(disk), units.Bytes(ram))
	return c, nil
}

// cmdCache is k3 cache list|size|clear [--prompt-cache DIR].
func cmdCache(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("cache", stderr)
	dirFlag := fs.String("prompt-cache", "", "the prompt cache folder (default $"+promptcache.Env+", else the user cache folder's k3/prompts)")
	setUsage(fs, stderr, "usage: k3 cache list|size|clear [--prompt-cache DIR]",
		"list: every saved prompt state (model, positions, size, last use); size: their total; clear: delete them all")
	pos, code := parseN(fs, args, 1, stderr, "k3 cache: give one of list, size or clear")
	if code >= 0 {
		return code
	}
	dir, err := promptcache.ResolveDir(*dirFlag)
	if err != nil {
		fmt.Fprintf(stderr, "k3 cache: %v\n", err)
		return ExitRuntime
	}
	if dir == "" {
		fmt.Fprintln(stderr, "k3 cache: the prompt cache is off; give --prompt-cache DIR")
		return ExitUsage
	}
	files := promptcache.Files(dir)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	switch pos[0] {
	case "list":
		tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tPOSITIONS\tSIZE\tLAST USED\tFILE")
		for _, f := range files {
			p := fmt.Sprint(f.Positions)
			if !f.OK {
				p = "damaged"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Model, p, units.Bytes(f.Size), f.Used.Format("2006-01-02 15:04"), f.Path)
		}
		tw.Flush()
		fmt.Fprintf(stdout, "%d saved prompt states, %s in %s\n", len(files), units.Bytes(total), dir)
	case "size":
		fmt.Fprintf(stdout, "%d saved prompt states, %s in %s\n", len(files), units.Bytes(total), dir)
	case "clear":
		n, b, err := promptcache.ClearDir(dir)
		fmt.Fprintf(stdout, "cleared %d saved prompt states (%s) from %s\n", n, units.Bytes(b), dir)
		if err != nil {
			fmt.Fprintf(stderr, "k3 cache: %v\n", err)
			return ExitRuntime
		}
	default:
		fmt.Fprintf(stderr, "k3 cache: unknown action %q: give list, size or clear\n", pos[0])
		return ExitUsage
	}
	return ExitOK
}
