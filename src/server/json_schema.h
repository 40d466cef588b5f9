/* json_schema.h: JSON Schema -> GBNF, for response_format json_schema /
 * json_object and for tool calls, compiled by pasada_grammar_create.
 *
 * Supported: type (and type arrays), enum, const, properties / required
 * (optional properties in their order, each optional) / additionalProperties
 * (false, true, a schema; absent means true), items, prefixItems (and the
 * older items-array / additionalItems), minItems, maxItems, anyOf, oneOf
 * (as anyOf: exclusivity is not enforced), allOf where the schemas merge,
 * $ref into the same document ($defs, definitions, any JSON pointer;
 * recursion allowed where it can end: a $ref cycle that consumes nothing,
 * or one required at every level, is a 400 naming its path), string minLength / maxLength / pattern (a regex
 * subset) / format (date, time, date-time, uuid, email), integer minimum /
 * maximum / exclusive* (exact digit ranges), number bounds that are
 * integers. A schema with no type takes the type its keywords imply.
 * Annotations (title, description, examples, default, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly) are ignored; any other keyword
 * is refused with a 400 naming it and its place (a JSON pointer).
 *
 * The JSON is compact with bounded optional whitespace: after { [ , : and
 * before } ] , at most one space, or a newline and up to 24 spaces or tabs;
 * numbers have at most 16 integer and 16 fraction digits and 3 exponent
 * digits; strings of additional-property keys use no escapes. */
#ifndef PASADA_SERVER_JSON_SCHEMA_H
#define PASADA_SERVER_JSON_SCHEMA_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "server/server.h"

/* Appends GBNF rules for a JSON schema whose top rule is named exactly
 * `prefix` and every helper rule starts with `prefix` + "-" (so several
 * schemas can share one grammar). An unsupported keyword or invalid schema:
 * false with e set to a 400 naming the keyword and path (e->param is left
 * "" for the caller to name its field). */
bool srv_json_schema_rules(const cJSON *schema, const char *prefix, srv_buf *out, srv_error *e);
/* A whole grammar (rule "root") for a schema; NULL schema = any JSON
 * object (response_format json_object). malloc'd; NULL with e set. */
char *srv_json_schema_gbnf(const cJSON *schema, srv_error *e);

#endif
