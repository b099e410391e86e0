package workload

// terms stands in for the 200 frequent news-report terms of Carzaniga09
// §5.1.4 [18]. Config.Terms selects a prefix of the list, so its order is
// part of the workload definition: appending is safe, reordering changes
// every seeded experiment. Every term has at least 3 bytes so that a
// contains operand can be taken from its interior.
var terms = [...]string{
	"government", "market", "police", "president", "minister",
	"country", "people", "percent", "company", "official",
	"officials", "state", "states", "world", "report",
	"reported", "reports", "million", "billion", "national",
	"public", "security", "military", "forces", "election",
	"elections", "party", "leader", "leaders", "court",
	"trade", "prices", "price", "stock", "stocks",
	"shares", "bank", "banks", "economy", "economic",
	"business", "financial", "investors", "analysts", "growth",
	"interest", "rates", "dollar", "exports", "imports",
	"industry", "production", "workers", "union", "talks",
	"peace", "agreement", "meeting", "council", "committee",
	"parliament", "congress", "senate", "house", "federal",
	"foreign", "defence", "attack", "troops", "soldiers",
	"killed", "wounded", "army", "rebels", "capital",
	"city", "region", "border", "china", "japan",
	"russia", "germany", "france", "britain", "israel",
	"europe", "european", "american", "united", "nations",
	"international", "news", "agency", "spokesman", "statement",
	"sources", "newspaper", "television", "radio", "said",
	"told", "saying", "added", "expected", "announced",
	"plans", "plan", "policy", "reform", "budget",
	"deficit", "taxes", "spending", "oil", "energy",
	"power", "water", "food", "health", "hospital",
	"children", "women", "family", "school", "students",
	"crime", "arrested", "charges", "trial", "judge",
	"justice", "law", "rights", "human", "support",
	"opposition", "vote", "voters", "campaign", "candidate",
	"prime", "chief", "director", "chairman", "executive",
	"board", "group", "companies", "sales", "profit",
	"profits", "loss", "quarter", "results", "earnings",
	"revenue", "share", "index", "trading", "traders",
	"exchange", "currency", "central", "inflation", "unemployment",
	"jobs", "fund", "funds", "debt", "loans",
	"credit", "investment", "contract", "deal", "merger",
	"service", "services", "system", "network", "technology",
	"computer", "software", "airline", "aircraft", "transport",
	"weather", "storm", "fire", "accident", "season",
	"match", "team", "players", "game", "final",
	"championship", "cup", "olympic", "record", "history",
}

// MaxTerms is the size of the built-in term list, the largest valid
// Config.Terms.
const MaxTerms = len(terms)
