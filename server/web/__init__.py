"""The website: Flask views, forms, templates and static files, the account pages. Views translate
requests into actions and actions' answers into pages."""
