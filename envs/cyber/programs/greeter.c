/* greeter: a tiny chat bot. Each input line is a command:
 *   NAME <name>   remember the user's name
 *   SAY <text>    log the text and answer it
 */
#include <stdio.h>
#include <string.h>

static char user[64] = "stranger";

static void log_message(const char *text) {
    printf("[%s] ", user);
    printf(text);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "NAME ", 5) == 0) {
            snprintf(user, sizeof user, "%s", line + 5);
            printf("hello, %s!\n", user);
        } else if (strncmp(line, "SAY ", 4) == 0) {
            log_message(line + 4);
            printf("bot: nice to hear that, %s\n", user);
        } else if (line[0] != '\0') {
            printf("unknown command\n");
        }
    }
    fclose(f);
    return 0;
}
