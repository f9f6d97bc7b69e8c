// Sorts each input line with Go's own sort.Slice and prints the resulting order.
// Input: one case per line, space-separated integer keys. Output: per case, the
// original indices in the order sort.Slice left them (elements compare by key only,
// so equal keys show where the unstable sort put them). Used by tests/unit/preemption/test_go_sort.py.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

type elem struct{ key, id int }

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		fields := strings.Fields(in.Text())
		xs := make([]elem, len(fields))
		for i, f := range fields {
			k, err := strconv.Atoi(f)
			if err != nil {
				panic(err)
			}
			xs[i] = elem{k, i}
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i].key < xs[j].key })
		ids := make([]string, len(xs))
		for i, x := range xs {
			ids[i] = strconv.Itoa(x.id)
		}
		fmt.Fprintln(out, strings.Join(ids, " "))
	}
}
