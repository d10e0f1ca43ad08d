/* md2man.c: renders docs/memreport.1.md into a man page with libcmark's man renderer.
 *
 * usage: md2man NAME SECTION VERSION < page.md > page.N
 * cmark's renderer writes the body (.SH, .PP, .IP); this adds the .TH title line. No date, so
 * the page is the same bytes on every build. */
#include <cmark.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: md2man NAME SECTION VERSION < page.md > page.N\n");
		return 2;
	}
	cmark_parser *parser = cmark_parser_new(CMARK_OPT_DEFAULT);
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
		cmark_parser_feed(parser, chunk, n);
	int rc = ferror(stdin) ? 1 : 0;
	cmark_node *doc = cmark_parser_finish(parser);
	char *man = doc ? cmark_render_man(doc, CMARK_OPT_DEFAULT, 0) : NULL;
	if (!man)
		rc = 1;
	if (!rc) {
		printf(".TH \"%s\" \"%s\" \"\" \"%s\" \"User Commands\"\n", argv[1], argv[2],
		       argv[3]);
		fputs(man, stdout);
	}
	free(man);
	if (doc)
		cmark_node_free(doc);
	cmark_parser_free(parser);
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = 1;
	return rc;
}
