"""minengine: a tiny LLM inference engine used as smithbot's offline demo target."""
