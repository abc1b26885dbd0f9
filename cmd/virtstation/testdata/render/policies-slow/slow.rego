package virtstation.rules.slow

# Valid, and its tests pass, but it takes seconds on every VM: four million
# products, none of them negative.
deny contains {"id": "slow", "field": "metadata", "message": "never"} if {
	some i in numbers.range(1, 2000)
	some j in numbers.range(1, 2000)
	i * j < 0
}
