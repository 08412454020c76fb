// Command short prints its arguments cut to a width: short -n 8 text...
package main

import (
	"flag"
	"fmt"
	"strings"

	"example.com/textkit/strutil"
)

func main() {
	n := flag.Int("n", 20, "the width, in characters")
	flag.Parse()
	fmt.Println(strutil.Truncate(strings.Join(flag.Args(), " "), *n))
}
