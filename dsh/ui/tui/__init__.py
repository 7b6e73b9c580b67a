"""The Textual front end of dsh: the app, its widgets and its dialogs."""
