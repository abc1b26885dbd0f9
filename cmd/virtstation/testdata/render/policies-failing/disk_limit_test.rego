package virtstation.rules.disk_limit_test

import data.virtstation.rules.disk_limit

test_four_disks_denied if {
	count(disk_limit.deny) == 1 with input as {"dataDisks": [{}, {}, {}, {}]}
}
