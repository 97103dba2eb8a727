"""Money and usage: the spending cap and its ledger file, and the running tallies of calls, tokens and cost."""
