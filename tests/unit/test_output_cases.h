/* test_output_cases.h: hand-written outputs for test_output.c: what the
 * rendered corpus cannot show (malformed calls, outputs cut off mid-call,
 * tools off, text around calls, value typing by the tool schemas, the
 * families whose templates do not render their calls) and the detection of
 * architectures without a template. */

typedef struct {
  const char *label;
  srv_out_format fmt;
  const char *think_open, *think_close;
  bool tools, in_reasoning;
  const char *text;
  const char *content, *reasoning;
  int n_calls;
  want_call calls[3];
  bool typed; /* parse with TYPED_TOOLS as the request's tools */
} hand_case;

/* f(city: string, zip: string, n: integer, tags: array) */
static const char TYPED_TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\"},"
    "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\"}}}}}]";

#define W "{\"city\":\"Paris\"}"
#define TC "<tool_call>"
#define ETC "</tool_call>"
#define DSB(s) "<\xef\xbd\x9c" s "\xef\xbd\x9c>"
#define DS_CALLS          \
  DSB("tool\xe2\x96\x81"  \
      "calls\xe2\x96\x81" \
      "begin")
#define DS_CALL          \
  DSB("tool\xe2\x96\x81" \
      "call\xe2\x96\x81" \
      "begin")
#define DS_SEP           \
  DSB("tool\xe2\x96\x81" \
      "sep")
#define DS_CEND          \
  DSB("tool\xe2\x96\x81" \
      "call\xe2\x96\x81" \
      "end")
#define DS_END            \
  DSB("tool\xe2\x96\x81"  \
      "calls\xe2\x96\x81" \
      "end")
#define DSML      \
  "<\xef\xbd\x9c" \
  "DSML"          \
  "\xef\xbd\x9c"
#define DSMLE      \
  "</\xef\xbd\x9c" \
  "DSML"           \
  "\xef\xbd\x9c"

// clang-format off
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const hand_case HAND[] = {
  /* Hermes */
  {"hermes text around", SRV_OUT_HERMES, "<think>", "</think>", true, false,
   "Checking.\n" TC "\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}\n" ETC "\nDone.",
   "Checking.\n\nDone.", "", 1, {{"f", W}}},
  {"hermes malformed JSON is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {\"city\": }" ETC,
   TC "{\"name\": \"f\", \"arguments\": {\"city\": }" ETC, "", 0, {{0}}},
  {"hermes no name is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"arguments\": {}}" ETC, TC "{\"arguments\": {}}" ETC, "", 0, {{0}}},
  {"hermes arguments not an object is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": [1]}" ETC, TC "{\"name\": \"f\", \"arguments\": [1]}" ETC,
   "", 0, {{0}}},
  {"hermes \\u with a non-hex digit is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {\"q\": \"caf\\u00g9 ok\"}}" ETC,
   TC "{\"name\": \"f\", \"arguments\": {\"q\": \"caf\\u00g9 ok\"}}" ETC, "", 0, {{0}}},
  {"hermes unknown escape is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {\"q\": \"a\\x41\"}}" ETC,
   TC "{\"name\": \"f\", \"arguments\": {\"q\": \"a\\x41\"}}" ETC, "", 0, {{0}}},
  {"hermes JSON escapes kept", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {\"q\": \"\\u00e9\\\"\\/\\b\\n\\\\\"}}" ETC, "", "", 1,
   {{"f", "{\"q\":\"\\u00e9\\\"\\/\\b\\n\\\\\"}"}}},
  {"hermes cut off mid-call stays content", SRV_OUT_HERMES, "", "", true, false,
   "Sure." TC "{\"name\": \"f\", \"argu", "Sure." TC "{\"name\": \"f\", \"argu", "", 0, {{0}}},
  {"hermes close tag cut off", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_", "", "", 1, {{"f", W}}},
  {"hermes text after JSON is content", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {}} oops" ETC,
   TC "{\"name\": \"f\", \"arguments\": {}} oops" ETC, "", 0, {{0}}},
  {"hermes tools off", SRV_OUT_HERMES, "<think>", "</think>", false, false,
   "<think>hm</think>" TC "{\"name\": \"f\", \"arguments\": {}}" ETC,
   TC "{\"name\": \"f\", \"arguments\": {}}" ETC, "hm", 0, {{0}}},
  {"hermes arguments as a string", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}" ETC, "", "", 1,
   {{"f", W}}},
  {"hermes no arguments", SRV_OUT_HERMES, "", "", true, false, TC "{\"name\": \"f\"}" ETC, "", "",
   1, {{"f", "{}"}}},
  {"hermes two calls in one block", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\", \"arguments\": {}}" ETC, "", "", 2,
   {{"f", "{}"}, {"g", "{}"}}},
  {"hermes good then bad call", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\":\"f\",\"arguments\":{}}" ETC TC "{\"name\":\"g\",\"arguments\":{]}" ETC,
   TC "{\"name\":\"g\",\"arguments\":{]}" ETC, "", 1, {{"f", "{}"}}},
  {"hermes in reasoning", SRV_OUT_HERMES, "<think>", "</think>", true, true,
   "let me see\n</think>\n\nIt is " TC, "It is " TC, "let me see", 0, {{0}}},
  {"hermes reasoning never closed", SRV_OUT_HERMES, "<think>", "</think>", true, true,
   "still thinking </thi", "", "still thinking </thi", 0, {{0}}},
  {"hermes stray close before anything", SRV_OUT_HERMES, "<think>", "</think>", true, false,
   "\n</think>\n\nHi", "Hi", "", 0, {{0}}},
  {"hermes close later is content", SRV_OUT_HERMES, "<think>", "</think>", true, false,
   "Hi </think> there", "Hi </think> there", "", 0, {{0}}},
  {"hermes unicode and escapes", SRV_OUT_HERMES, "", "", true, false,
   "\xc3\xa9t\xc3\xa9 " TC "{\"name\":\"f\",\"arguments\":{\"q\":\"\\u00e9\\n\\\"x\\\" \xf0\x9f\x98\x80\"}}" ETC,
   "\xc3\xa9t\xc3\xa9", "", 1, {{"f", "{\"q\":\"\xc3\xa9\\n\\\"x\\\" \xf0\x9f\x98\x80\"}"}}},
  {"hermes nested braces in strings", SRV_OUT_HERMES, "", "", true, false,
   TC "{\"name\":\"f\",\"arguments\":{\"code\":\"if (x) { y(\\\"}\\\"); }\"}}" ETC, "", "", 1,
   {{"f", "{\"code\":\"if (x) { y(\\\"}\\\"); }\"}"}}},
  /* Llama 3 */
  {"llama3 bare JSON", SRV_OUT_LLAMA3, "", "", true, false,
   "{\"name\": \"f\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1, {{"f", W}}},
  {"llama3 two calls with ;", SRV_OUT_LLAMA3, "", "", true, false,
   "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {}}", "", "", 2,
   {{"f", "{}"}, {"g", "{}"}}},
  {"llama3 call then text", SRV_OUT_LLAMA3, "", "", true, false,
   "{\"name\": \"f\", \"parameters\": {}}\nThat is all.", "That is all.", "", 1, {{"f", "{}"}}},
  {"llama3 JSON that is not a call", SRV_OUT_LLAMA3, "", "", true, false, "{\"answer\": 42}",
   "{\"answer\": 42}", "", 0, {{0}}},
  {"llama3 JSON later in the text", SRV_OUT_LLAMA3, "", "", true, false,
   "Use {\"name\": \"f\", \"parameters\": {}}", "Use {\"name\": \"f\", \"parameters\": {}}", "", 0,
   {{0}}},
  {"llama3 built-in tool", SRV_OUT_LLAMA3, "", "", true, false,
   "<|python_tag|>brave_search.call(query=\"paris weather\")", "", "", 1,
   {{"brave_search", "{\"query\":\"paris weather\"}"}}},
  {"llama3 python tag JSON", SRV_OUT_LLAMA3, "", "", true, false,
   "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"city\": \"Paris\"}}", "", "", 1, {{"f", W}}},
  {"llama3 code", SRV_OUT_LLAMA3, "", "", true, false, "<|python_tag|>print(1 + 1)\nx = 2", "", "",
   1, {{"python", "{\"code\":\"print(1 + 1)\\nx = 2\"}"}}},
  {"llama3 cut off", SRV_OUT_LLAMA3, "", "", true, false, "{\"name\": \"f\", \"param",
   "{\"name\": \"f\", \"param", "", 0, {{0}}},
  {"llama3 tools off", SRV_OUT_LLAMA3, "", "", false, false,
   "{\"name\": \"f\", \"parameters\": {}}", "{\"name\": \"f\", \"parameters\": {}}", "", 0, {{0}}},
  /* Mistral */
  {"mistral array", SRV_OUT_MISTRAL, "[THINK]", "[/THINK]", true, false,
   "[THINK]plan[/THINK][TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}]", "",
   "plan", 1, {{"f", W}}},
  {"mistral name[ARGS] twice", SRV_OUT_MISTRAL, "", "", true, false,
   "[TOOL_CALLS]f[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]g[ARGS]{}", "", "", 2,
   {{"f", W}, {"g", "{}"}}},
  {"mistral call id", SRV_OUT_MISTRAL, "", "", true, false,
   "[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}", "", "", 1, {{"f", W}}},
  {"mistral bad args", SRV_OUT_MISTRAL, "", "", true, false, "[TOOL_CALLS]f[ARGS]{\"a\" 1}",
   "[TOOL_CALLS]f[ARGS]{\"a\" 1}", "", 0, {{0}}},
  {"mistral not a name", SRV_OUT_MISTRAL, "", "", true, false, "[TOOL_CALLS] hello there",
   "[TOOL_CALLS] hello there", "", 0, {{0}}},
  /* Granite 3.3: its template does not render calls; its system prompt asks
     for <|tool_call|> and a JSON list */
  {"granite", SRV_OUT_GRANITE, "<think>", "</think>", true, false,
   "<think>ok</think><|tool_call|>[{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}]", "",
   "ok", 1, {{"f", W}}},
  {"granite response tags", SRV_OUT_GRANITE, "<think>", "</think>", true, false,
   "<think>ok</think><response>Hello</response>", "Hello", "ok", 0, {{0}}},
  {"granite empty list is content", SRV_OUT_GRANITE, "", "", true, false, "<|tool_call|>[]",
   "<|tool_call|>[]", "", 0, {{0}}},
  /* DeepSeek */
  {"deepseek section cut off keeps whole calls", SRV_OUT_DEEPSEEK, "<think>", "</think>", true,
   false,
   DS_CALLS DS_CALL "f" DS_SEP "{}" DS_CEND DS_CALL "g" DS_SEP "{\"a\":",
   DS_CALL "g" DS_SEP "{\"a\":", "", 1, {{"f", "{}"}}},
  {"deepseek R1 form without fence", SRV_OUT_DEEPSEEK, "<think>", "</think>", true, true,
   "hm</think>" DS_CALLS DS_CALL "function" DS_SEP "f\n{\"city\":\"Paris\"}" DS_CEND DS_END, "",
   "hm", 1, {{"f", W}}},
  /* Kimi */
  {"kimi", SRV_OUT_KIMI, "<think>", "</think>", true, false,
   "<think>r</think>Ok.<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
   "<|tool_call_argument_begin|>{\"city\":\"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
   "Ok.", "r", 1, {{"f", W}}},
  {"kimi section end cut off", SRV_OUT_KIMI, "", "", true, false,
   "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
   "<|tool_call_end|><|tool_calls_sec", "", "", 1, {{"f", "{}"}}},
  /* Solar */
  {"solar", SRV_OUT_SOLAR, "<|think|>", "<|end|>", true, false,
   "<|think|>plan<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>x1<|tool_call:name|>f"
   "<|tool_call:args|>{\"city\": \"Paris\"}<|tool_call:end|><|calls|>", "", "plan", 1, {{"f", W}}},
  {"solar content", SRV_OUT_SOLAR, "<|think|>", "<|end|>", true, false,
   "<|think|>plan<|end|><|begin|>assistant<|content|>Hello", "Hello", "plan", 0, {{0}}},
  /* Qwen3-Coder: typed by the schema when known, else by the text */
  {"qwen3-coder untyped values", SRV_OUT_QWEN3_CODER, "", "", true, false,
   TC "\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\nhello world\n</parameter>\n"
   "<parameter=b>\ntrue\n</parameter>\n<parameter=o>\n{\"k\": [1, 2]}\n</parameter>\n</function>\n" ETC,
   "", "", 1, {{"f", "{\"n\":42,\"s\":\"hello world\",\"b\":true,\"o\":{\"k\":[1,2]}}"}}},
  {"qwen3-coder typed by the tools", SRV_OUT_QWEN3_CODER, "", "", true, false,
   TC "<function=f><parameter=zip>\n75001\n</parameter><parameter=n>7</parameter>"
   "<parameter=city>null</parameter><parameter=tags>['a', 'b']</parameter></function>" ETC,
   "", "", 1, {{"f", "{\"zip\":\"75001\",\"n\":7,\"city\":\"null\",\"tags\":[\"a\",\"b\"]}"}},
   true},
  {"qwen3-coder multi-line string", SRV_OUT_QWEN3_CODER, "", "", true, false,
   TC "<function=f><parameter=city>\nline 1\n  line 2\n\n</parameter></function>" ETC, "", "", 1,
   {{"f", "{\"city\":\"line 1\\n  line 2\\n\"}"}}, true},
  {"qwen3-coder missing close is content", SRV_OUT_QWEN3_CODER, "", "", true, false,
   TC "<function=f><parameter=a>1", TC "<function=f><parameter=a>1", "", 0, {{0}}},
  {"qwen3-coder garbage is content", SRV_OUT_QWEN3_CODER, "", "", true, false, TC "hello" ETC,
   TC "hello" ETC, "", 0, {{0}}},
  /* GLM */
  {"glm no arguments", SRV_OUT_GLM, "<think>", "</think>", true, false,
   "<think></think>\n" TC "f\n" ETC, "", "", 1, {{"f", "{}"}}},
  {"glm typed", SRV_OUT_GLM, "", "", true, false,
   TC "f\n<arg_key>zip</arg_key>\n<arg_value>01234</arg_value>\n<arg_key>n</arg_key>"
   "<arg_value>3</arg_value>" ETC, "", "", 1, {{"f", "{\"zip\":\"01234\",\"n\":3}"}}, true},
  /* MiniMax M2, DeepSeek DSML, MiniCPM */
  {"minimax", SRV_OUT_MINIMAX, "<think>", "</think>", true, false,
   "<think>go</think>\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"city\">Paris"
   "</parameter>\n</invoke>\n</minimax:tool_call>", "", "go", 1, {{"f", W}}},
  {"dsml string attribute", SRV_OUT_DEEPSEEK_DSML, "<think>", "</think>", true, false,
   DSML "function_calls>\n" DSML "invoke name=\"f\">\n" DSML "parameter name=\"zip\" string=\"true\">"
   "123" DSMLE "parameter>\n" DSML "parameter name=\"n\" string=\"false\">123" DSMLE "parameter>\n"
   DSMLE "invoke>\n" DSMLE "function_calls>", "", "", 1, {{"f", "{\"zip\":\"123\",\"n\":123}"}}},
  {"minicpm cdata", SRV_OUT_MINICPM, "<think>", "</think>", true, false,
   "<function name=\"f\"><param name=\"city\"><![CDATA[a < b & \"c\"]]></param>"
   "<param name=\"n\">True</param></function>", "", "", 1,
   {{"f", "{\"city\":\"a < b & \\\"c\\\"\",\"n\":true}"}}},
  /* LFM2 */
  {"lfm2 python values", SRV_OUT_LFM2, "<think>", "</think>", true, false,
   "<|tool_call_start|>[f(a=1, b='it's', c=True, d=None, e=[1, 'x'], g={'k': 2.5})]"
   "<|tool_call_end|>Done.", "Done.", "", 1,
   {{"f", "{\"a\":1,\"b\":\"it's\",\"c\":true,\"d\":null,\"e\":[1,\"x\"],\"g\":{\"k\":2.5}}"}}},
  {"lfm2 escapes", SRV_OUT_LFM2, "", "", true, false,
   "<|tool_call_start|>[f(a=\"x\\\"y\\n\\u00e9\", b=-1.5e3)]<|tool_call_end|>", "", "", 1,
   {{"f", "{\"a\":\"x\\\"y\\n\xc3\xa9\",\"b\":-1.5e3}"}}},
  {"lfm2 positional argument is content", SRV_OUT_LFM2, "", "", true, false,
   "<|tool_call_start|>[f(1)]<|tool_call_end|>", "<|tool_call_start|>[f(1)]<|tool_call_end|>", "",
   0, {{0}}},
  /* Gemma 4 */
  {"gemma nested literal", SRV_OUT_GEMMA, "<|channel>thought\n", "<channel|>", true, false,
   "<|channel>thought\nhmm<channel|><|tool_call>call:f{a:<|\"|>x, y<|\"|>,b:[1,<|\"|>z<|\"|>],"
   "c:{d:false}}<tool_call|><|tool_response>",
   "", "hmm", 1, {{"f", "{\"a\":\"x, y\",\"b\":[1,\"z\"],\"c\":{\"d\":false}}"}}},
  {"gemma bad literal is content", SRV_OUT_GEMMA, "", "", true, false,
   "<|tool_call>call:f{a:}<tool_call|>", "<|tool_call>call:f{a:}<tool_call|>", "", 0, {{0}}},
  /* gpt-oss */
  {"gpt-oss analysis then final", SRV_OUT_GPT_OSS, "", "", true, false,
   "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Hi",
   "Hi", "think", 0, {{0}}},
  {"gpt-oss recipient after channel", SRV_OUT_GPT_OSS, "", "", true, false,
   "<|channel|>analysis<|message|>need weather<|end|><|start|>assistant<|channel|>commentary "
   "to=functions.f <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
   "", "need weather", 1, {{"f", W}}},
  {"gpt-oss two analysis messages", SRV_OUT_GPT_OSS, "", "", true, false,
   "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two"
   "<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>", "ok", "one\ntwo", 0, {{0}}},
  {"gpt-oss call cut off", SRV_OUT_GPT_OSS, "", "", true, false,
   " to=functions.f<|channel|>commentary json<|message|>{\"city\": ", "{\"city\":", "", 0, {{0}}},
  {"gpt-oss tools off", SRV_OUT_GPT_OSS, "", "", false, false,
   " to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "{}", "", 0, {{0}}},
  {"gpt-oss no harmony at all", SRV_OUT_GPT_OSS, "", "", true, false, "Just text.", "Just text.",
   "", 0, {{0}}},
  /* ATEM */
  {"atem", SRV_OUT_ATEM, "", "", true, false,
   " to=self<|message|>plan<|eom|><|start|>assistant to=f<|message|><atem:function_calls>\n"
   "<atem:invoke name=\"f\">\n<atem:parameter name=\"city\">Paris</atem:parameter>\n"
   "</atem:invoke>\n</atem:function_calls>", "", "plan", 1, {{"f", W}}},
  /* functionary */
  {"functionary v3.2 text then call", SRV_OUT_FUNCTIONARY_V32, "", "", true, false,
   "all\nLet me look.>>>f\n{\"city\": \"Paris\"}", "Let me look.", "", 1, {{"f", W}}},
  {"functionary v3.2 python", SRV_OUT_FUNCTIONARY_V32, "", "", true, false, "python\nprint(2)", "",
   "", 1, {{"python", "{\"code\":\"print(2)\"}"}}},
  {"functionary v3.2 no recipient line", SRV_OUT_FUNCTIONARY_V32, "", "", true, false,
   "Hello there, how are you?", "Hello there, how are you?", "", 0, {{0}}},
  {"functionary v3.1 python tag", SRV_OUT_FUNCTIONARY, "", "", true, false,
   "<function=f>{\"city\": \"Paris\"}</function><|python_tag|>import os", "", "", 2,
   {{"f", W}, {"python", "{\"code\":\"import os\"}"}}},
  /* Command R */
  {"command-r response", SRV_OUT_COMMAND_R, "<|START_THINKING|>", "<|END_THINKING|>", true, false,
   "<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hello<|END_RESPONSE|>", "Hello",
   "plan", 0, {{0}}},
  {"command-r plus fence cut off", SRV_OUT_COMMAND_R_PLUS, "", "", true, false,
   "Action: ```json\n[{\"tool_name\": \"f\", \"parameters\": {}}]", "", "", 1, {{"f", "{}"}}},
  /* GigaChat, firefunction, Nemotron, MiniMax M1 */
  {"gigachat", SRV_OUT_GIGACHAT, "", "", true, false,
   "<|function_call|>{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\"}}", "", "", 1,
   {{"f", W}}},
  {"firefunction word in text", SRV_OUT_FIREFUNCTION, "", "", true, false,
   "I like functools a lot", "I like functools a lot", "", 0, {{0}}},
  {"nemotron bad array is content", SRV_OUT_NEMOTRON, "<think>", "</think>", true, false,
   "<TOOLCALL>[{\"name\": \"f\"}, 3]</TOOLCALL>", "<TOOLCALL>[{\"name\": \"f\"}, 3]</TOOLCALL>", "",
   0, {{0}}},
  {"minimax-m1 objects", SRV_OUT_MINIMAX_M1, "", "", true, false,
   "<tool_calls>\n{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\", \"arguments\": {}}\n"
   "</tool_calls>", "", "", 2, {{"f", "{}"}, {"g", "{}"}}},
  /* Apriel: reasoning first, whatever the prompt */
  {"apriel", SRV_OUT_APRIEL, "", "[BEGIN FINAL RESPONSE]", true, false,
   "Step 1.\n[BEGIN FINAL RESPONSE]\nIt is sunny.\n[END FINAL RESPONSE]", "It is sunny.",
   "Step 1.", 0, {{0}}},
  /* plain */
  {"plain keeps markers", SRV_OUT_PLAIN, "<think>", "</think>", true, false,
   "<think>a</think>" TC "{\"name\":\"f\",\"arguments\":{}}" ETC,
   TC "{\"name\":\"f\",\"arguments\":{}}" ETC, "a", 0, {{0}}},
  {"empty output", SRV_OUT_HERMES, "<think>", "</think>", true, true, "", "", "", 0, {{0}}},
};
#pragma GCC diagnostic pop
// clang-format on

/* Style detection from the architecture when there is no template. */
static void arch_cases(void) {
  srv_out_style st;
  srv_out_style_detect(NULL, "qwen3", &st);
  CHECK(st.format == SRV_OUT_HERMES && !strcmp(st.think_open, "<think>"),
        "qwen3 without a template");
  srv_out_style_detect(NULL, "llama", &st);
  CHECK(st.format == SRV_OUT_PLAIN && !st.think_open[0], "llama without a template");
  srv_out_style_detect("{{ messages }}", "qwen3", &st);
  CHECK(st.format == SRV_OUT_PLAIN, "a template without tool syntax is plain");
}

static int hand_cases(void) {
  cJSON *typed = cJSON_Parse(TYPED_TOOLS);
  CHECK(typed, "TYPED_TOOLS");
  int n = (int)(sizeof HAND / sizeof HAND[0]);
  for (int i = 0; i < n; i++) {
    const hand_case *h = &HAND[i];
    srv_out_style st = {.format = h->fmt};
    snprintf(st.think_open, sizeof st.think_open, "%s", h->think_open);
    snprintf(st.think_close, sizeof st.think_close, "%s", h->think_close);
    srv_out_opts o = {.tools = h->tools,
                      .in_reasoning = h->in_reasoning,
                      .id_seed = 7,
                      .tool_defs = h->typed ? typed : NULL};
    check_case(h->label, &st, &o, h->text, strlen(h->text), h->content, h->reasoning, h->calls,
               h->n_calls);
  }
  cJSON_Delete(typed);
  arch_cases();
  return n;
}
