package virtstation

# The aggregate is tested with mocked rule packages, so that operator
# modules (which add or replace rule packages) cannot break these tests.
# Each rule's behaviour is tested in its own package.

v(id, msg) := {"id": id, "field": "metadata.name", "message": sprintf("%s (rule: %s; fix: none)", [msg, id])}

mock_rules := {
	"a": {"deny": {v("a", "one"), v("a", "two")}, "warn": {v("a", "careful")}},
	"b": {"deny": {v("b", "three")}},
	"c": {"warn": set()},
	"d": {"helper": true},
}

test_deny_collects_every_rule_package if {
	d := deny with data.virtstation.rules as mock_rules
	d == {v("a", "one"), v("a", "two"), v("b", "three")}
}

test_warn_collects_every_rule_package if {
	w := warn with data.virtstation.rules as mock_rules
	w == {v("a", "careful")}
}

test_no_rules_no_violations if {
	count(deny) == 0 with data.virtstation.rules as {}
	count(warn) == 0 with data.virtstation.rules as {}
}

test_duplicates_collapse if {
	d := deny with data.virtstation.rules as {"a": {"deny": {v("x", "same")}}, "b": {"deny": {v("x", "same")}}}
	d == {v("x", "same")}
}
