/* username: registers an account. The first line of the input is the user name, at most
 * NAME_LEN (16) characters; the account is created and printed.
 */
#include <stdio.h>
#include <string.h>

#define NAME_LEN 16

struct account {
    char name[NAME_LEN];
    int is_admin;
};

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
    char line[128] = {0};
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    size_t len = strlen(line);
    if (len == 0) {
        printf("empty name\n");
        return 1;
    }
    if (len > NAME_LEN) {
        printf("name too long (max %d)\n", NAME_LEN);
        return 1;
    }
    struct account acct = {{0}, 0};
    /* copy the name with its terminating NUL */
    for (size_t i = 0; i <= len; i++)
        acct.name[i] = line[i];
    printf("registered %s (admin: %d)\n", acct.name, acct.is_admin);
    return 0;
}
