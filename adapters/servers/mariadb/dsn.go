package mariadb

import "os"

// DefaultDSN is the MariaDB (or MySQL) server that commands and tests use
// when told of none (and $LOCKPROVER_MYSQL_DSN is unset), in
// go-sql-driver/mysql's form: the machine's own server on 127.0.0.1:3306,
// user root without a password, database test.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// DSN is the server a command uses: the DSN given, else
// $LOCKPROVER_MYSQL_DSN, else DefaultDSN.
func DSN(given string) string {
	if given != "" {
		return given
	}
	if d := os.Getenv("LOCKPROVER_MYSQL_DSN"); d != "" {
		return d
	}
	return DefaultDSN
}
