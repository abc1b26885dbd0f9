# Package virtstation is what the validating webhook queries: the union of
# the deny and warn sets of every rule package under virtstation.rules.
#
# Each element is {"id": <rule id>, "field": <field path>, "message": <what
# is wrong> (rule: <id>; fix: <how to fix>)}. The webhook applies the
# enforcement mode of the rule id (deny, warn or dryrun) to deny elements;
# warn elements are always admission warnings.
package virtstation

deny contains v if {
	some r
	some v in data.virtstation.rules[r].deny
}

warn contains v if {
	some r
	some v in data.virtstation.rules[r].warn
}
