"""Below every layer, so each can use it: the one base of every error the package raises."""
