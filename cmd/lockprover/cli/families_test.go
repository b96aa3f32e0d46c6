package cli

import _ "github.com/lockprover/lockprover/cmd/lockprover/all" // the CLI's tests run every family, as cmd/lockprover does
