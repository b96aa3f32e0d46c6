package mariadb

import (
	"fmt"
	"testing"
)

// parseLockWaits reads who waits, and for a lock on which table, from
// InnoDB's status (MariaDB 10.11's format).
func TestParseLockWaits(t *testing.T) {
	status := `
=====================================
2025-01-01 00:00:00 0x7f INNODB MONITOR OUTPUT
=====================================
------------
TRANSACTIONS
------------
Trx id counter 9012
Purge done for trx's n:o < 9009 undo n:o < 0 state: running but idle
History list length 0
LIST OF TRANSACTIONS FOR EACH SESSION:
---TRANSACTION 9011, ACTIVE 0 sec starting index read
mysql tables in use 1, locked 1
LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)
MariaDB thread id 1106, OS thread handle 131258833057472, query id 3772799 127.0.0.1 root Updating
update zz_lwexp set v=v+1 where id=1
------- TRX HAS BEEN WAITING 100153 us FOR THIS LOCK TO BE GRANTED:
RECORD LOCKS space id 31 page no 3 n bits 320 index PRIMARY of table ` + "`test`.`zz_lwexp`" + ` trx id 9011 lock_mode X locks rec but not gap waiting
Record lock, heap no 2 PHYSICAL RECORD: n_fields 4; compact format; info bits 0
 0: len 4; hex 80000001; asc     ;;

------------------
---TRANSACTION 9010, ACTIVE 0 sec
2 lock struct(s), heap size 1128, 1 row lock(s)
MariaDB thread id 1105, OS thread handle 131258835822272, query id 3772798 127.0.0.1 root 
---TRANSACTION 9013, ACTIVE 0 sec
LOCK WAIT 2 lock struct(s), heap size 1128, 1 row lock(s)
MariaDB thread id 1107, OS thread handle 131258835822273, query id 3772800 127.0.0.1 root
------- TRX HAS BEEN WAITING 5 us FOR THIS LOCK TO BE GRANTED:
TABLE LOCK table ` + "`mysql`.`innodb_table_stats`" + ` trx id 9013 lock mode IX waiting
---TRANSACTION (0x7f61288c5180), not started
0 lock struct(s), heap size 1128, 0 row lock(s)
--------
FILE I/O
--------
LOCK WAIT 1 lock struct(s)
MariaDB thread id 1108,
`
	got := parseLockWaits(status)
	want := map[int64]string{1106: "`test`.`zz_lwexp`", 1107: "`mysql`.`innodb_table_stats`"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
