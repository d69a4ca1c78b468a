"""The built-in tools' domain: what they may know of a turn (TurnContext) and the tools."""
