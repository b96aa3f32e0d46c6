CREATE PROCEDURE bootstrapLockKeyRows(IN lockKey VARCHAR(255), IN maxLockCount INT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
BEGIN
    DECLARE n INT DEFAULT 0;
    /* one row per slot, 0..max-1; rows that exist are kept */
    WHILE n < maxLockCount DO
        INSERT IGNORE INTO SEMAPHORE_LOCK (LOCK_KEY, LOCK_NUM) VALUES (lockKey, n);
        SET n = n + 1;
    END WHILE;
END
